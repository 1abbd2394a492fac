/* main.c — the dtrain command: one table of subcommands drives dispatch and --help. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli/blas_core.h"
#include "cmd_bench_comm.h"

typedef struct dt_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} dt_command;

static const dt_command commands[] = {
    {"train", dt_cmd_train, "train a model (one process, or data-parallel under mpirun)"},
    {"launch", dt_cmd_launch,
     "run train under mpirun and restart it from its newest checkpoint when it fails"},
    {"eval", dt_cmd_eval, "test loss and accuracy of a checkpoint"},
    {"inspect", dt_cmd_inspect, "verify a checkpoint and print its header, layout and tensors"},
    {"export", dt_cmd_export,
     "write a checkpoint's weights as one PyTorch-loadable safetensors file, or (--format hf) "
     "a GPT as a Hugging Face directory"},
    {"generate", dt_cmd_generate,
     "continue a prompt with a trained GPT (key-value cache; checkpoint, HF dir or weights)"},
    {"plot", dt_cmd_plot, "draw a metrics file, a trace or bench-comm output as an SVG picture"},
    {"plan", dt_cmd_plan,
     "predict a step's communication on a layout from a link's measured speed"},
    {"bench-comm", dt_cmd_bench_comm,
     "time every collective and algorithm (under mpirun) and check every result"},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: dtrain <command> [options]   (dtrain <command> --help for details)\n\n"
                 "dtrain trains neural networks in one process or across MPI ranks.\n\n"
                 "commands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nexamples:\n"
                 "  dtrain train                              the seeds' ConvNet on Fashion-MNIST\n"
                 "  dtrain train examples/mlp.ini --epochs 3  the MLP example\n"
                 "  mpirun -np 4 dtrain train examples/mlp.ini  data-parallel on 4 ranks\n"
                 "\ndtrain --version prints the version.\n");
}

int main(int argc, char **argv)
{
    dt_cli_blas_reexec(argv);
    /* A file-size limit (ulimit -f) then fails a write with EFBIG, which the writers report
     * as a clear error leaving the previous file intact, instead of killing the process. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return DT_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return DT_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) { /* also dtrain launch's probe of a host */
        printf("dtrain %s\n", DT_VERSION_STRING);
        return DT_EXIT_OK;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "dtrain: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return DT_EXIT_USAGE;
}
