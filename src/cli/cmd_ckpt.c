/* cmd_ckpt.c — the commands that take a checkpoint (docs/checkpoint-format.md): `dtrain
 * inspect CKPT`, `dtrain export CKPT FILE.safetensors` and `dtrain eval CKPT`. CKPT names
 * one checkpoint set or a directory of them (then the newest valid one, each newer corrupt
 * or incomplete one named in a warning). `export --format hf` is export_hf.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/checkpoint.h"
#include "dtrain/train.h"

static void warn(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "dtrain: warning: %s\n", msg);
}

/* CKPT into the set's directory; prints the failure. */
static int find_set(const char *path, char *dir, size_t n, dt_ckpt_manifest *m)
{
    int found = 0;
    if (dt_ckpt_find(path, dir, n, m, &found, warn, NULL) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    if (!found) {
        fprintf(stderr, "dtrain: %s: no valid checkpoint there\n", path);
        return DT_EXIT_FAIL;
    }
    return DT_EXIT_OK;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* inspect and export take a fixed count of arguments: with --help, or with another count,
 * prints `text` (to stdout for --help, else stderr) and sets *rc; returns 1 when it did. */
static int usage(int argc, char **argv, int want, const char *text, int *rc)
{
    const int help = wants_help(argc, argv);
    if (!help && argc == want)
        return 0;
    fputs(text, help ? stdout : stderr);
    *rc = help ? DT_EXIT_OK : DT_EXIT_USAGE;
    return 1;
}

static void print_tensors(const dt_ckpt_set *s)
{
    printf("%-40s %-5s %-18s %-24s %s\n", "tensor", "dtype", "shape", "file", "crc32");
    for (int i = 0; i < dt_ckpt_set_count(s); i++) {
        const dt_st_tensor *t = dt_ckpt_set_get(s, i);
        char shape[96] = "(";
        size_t o = 1;
        for (int d = 0; d < t->ndim && o < sizeof shape; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, d ? ", %lld" : "%lld",
                                  (long long)t->shape[d]);
        if (o < sizeof shape)
            snprintf(shape + o, sizeof shape - o, ")");
        printf("%-40s %-5s %-18s %-24s ok\n", t->name, dt_st_dtype_name(t->dtype), shape,
               dt_ckpt_set_file_of(s, i));
    }
}

int dt_cmd_inspect(int argc, char **argv)
{
    int rc = DT_EXIT_OK;
    if (usage(argc, argv, 2,
              "usage: dtrain inspect CKPT\n\nVerifies a checkpoint (every file's size and "
              "CRC-32, every tensor's CRC-32)\nand prints its header, the layout that wrote "
              "it and its tensors. CKPT is one\ncheckpoint or a directory of them (then the "
              "newest valid one).\n",
              &rc))
        return rc;
    char dir[4096];
    dt_ckpt_manifest m;
    dt_ckpt_set *s = NULL;
    rc = find_set(argv[1], dir, sizeof dir, &m);
    if (rc != DT_EXIT_OK)
        return rc;
    if (dt_ckpt_open(dir, &s) != DT_OK || dt_ckpt_check_tensors(s) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    printf("checkpoint %s: format version %d, verified\n", dir, m.version);
    printf("step %lld (epoch %lld, %lld steps into it), %lld skipped, global batch %lld, seed "
           "%llu, optimizer %s\n",
           (long long)m.step, (long long)m.epoch + 1, (long long)m.epoch_step, (long long)m.skipped,
           (long long)m.global_batch, (unsigned long long)m.seed, m.optimizer);
    char zero[32] = "";
    if (m.zero)
        snprintf(zero, sizeof zero, " with ZeRO-%d", m.zero);
    printf("written under dp %d x tp %d x pp %d%s; ", m.dp, m.tp, m.pp, zero);
    if (m.token_ids)
        printf("input token ids (no scaling)\n");
    else
        printf("input scaling (x/255 - %g) / %g\n", m.input_mean, m.input_std);
    for (int i = 0; i < m.nfiles; i++)
        printf("file %-26s %12llu bytes  crc32 %08x  ok\n", m.files[i].name,
               (unsigned long long)m.files[i].bytes, (unsigned)m.files[i].crc32);
    print_tensors(s);
    dt_ckpt_close(s);
    return DT_EXIT_OK;
}

static const char export_usage[] =
    "usage: dtrain export CKPT FILE.safetensors\n"
    "       dtrain export CKPT DIR --format hf\n\n"
    "Writes a checkpoint's weights as one safetensors file under PyTorch's names\n"
    "(torch's load_state_dict takes it; so does dtrain train --init-weights), whatever\n"
    "layout wrote it. The same weights give the same bytes.\n\n"
    "options:\n"
    "  --format safetensors|hf  safetensors (the default): FILE as above. hf: a GPT\n"
    "                           (embedding, position, blocks, layernorm, lm_head, with\n"
    "                           Hugging Face's names) as the directory DIR, created if\n"
    "                           needed: DIR/model.safetensors (its tensors under\n"
    "                           GPT2LMHeadModel's names, no lm_head.weight: the head is\n"
    "                           tied) and DIR/config.json, which\n"
    "                           GPT2LMHeadModel.from_pretrained(DIR) loads as it is.\n";

/* CKPT OUT [--format F] in any order after the command; *format NULL for the default. */
static int export_args(int argc, char **argv, const char **ckpt, const char **out,
                       const char **format)
{
    *ckpt = *out = *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--format") == 0 && i + 1 < argc) {
            *format = argv[++i];
        } else if (strncmp(a, "--format=", 9) == 0) {
            *format = a + 9;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "dtrain export: %s '%s' (see dtrain export --help)\n",
                    strcmp(a, "--format") == 0 ? "option --format needs a value:"
                                               : "unknown option",
                    a);
            return DT_EXIT_USAGE;
        } else if (*ckpt == NULL) {
            *ckpt = a;
        } else if (*out == NULL) {
            *out = a;
        } else {
            fprintf(stderr, "dtrain export: unexpected argument '%s'\n", a);
            return DT_EXIT_USAGE;
        }
    }
    if (*ckpt == NULL || *out == NULL) {
        fputs(export_usage, stderr);
        return DT_EXIT_USAGE;
    }
    if (*format != NULL && strcmp(*format, "hf") != 0 && strcmp(*format, "safetensors") != 0) {
        fprintf(stderr, "dtrain export: --format: '%s' is not safetensors or hf\n", *format);
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

int dt_cmd_export(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        fputs(export_usage, stdout);
        return DT_EXIT_OK;
    }
    const char *ckpt, *out, *format;
    int rc = export_args(argc, argv, &ckpt, &out, &format);
    if (rc != DT_EXIT_OK)
        return rc;
    if (format != NULL && strcmp(format, "hf") == 0)
        return dt_cli_export_hf(ckpt, out);
    char dir[4096];
    dt_ckpt_manifest m;
    rc = find_set(ckpt, dir, sizeof dir, &m);
    if (rc != DT_EXIT_OK)
        return rc;
    if (dt_ckpt_export(dir, out) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    printf("dtrain: the weights of %s (step %lld) written to %s\n", dir, (long long)m.step, out);
    return DT_EXIT_OK;
}

static const dt_cli_option eval_opts[] = {
    {"--set", "KEY=VALUE", DT_OPT_SET, NULL, "override a key of the checkpoint's config"},
    {"--data", "DIR", DT_OPT_CONFIG_KEY, "data.dir", "directory of the IDX files"},
    {"--threads", "N", DT_OPT_CONFIG_KEY, "train.threads", "threads per rank"},
    {"--tp", "N", DT_OPT_CONFIG_KEY, "parallel.tp", "tensor-parallel ranks (default 1)"},
    {"--pp", "N", DT_OPT_CONFIG_KEY, "parallel.pp", "pipeline stages (default 1)"},
};
#define N_EVAL_OPTS ((int)(sizeof eval_opts / sizeof eval_opts[0]))

/* The checkpoint's own config (config.ini in the set), then the command line's changes:
 * argv[1] is CKPT, the rest options. */
static int eval_config(int argc, char **argv, const char *dir, const dt_ckpt_manifest *m,
                       dt_config *cfg)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_CONFIG);
    if (dt_config_load(path, cfg) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    /* The file writes every key: none of them is the user's choice, so none is judged as
     * one that changes nothing (dt_config_check); the command line's are. */
    dt_config_forget_given(cfg);
    /* The layout is this run's (the ranks it has now), not the writer's: reset before the
     * command line's options, which come later and win. */
    cfg->parallel.dp = 0;
    cfg->parallel.tp = 1;
    cfg->parallel.pp = 1;
    cfg->parallel.zero = 0;
    cfg->parallel.pp_placement = DT_STAGES_BALANCED;
    cfg->parallel.n_pp_split = 0;
    char **args = calloc((size_t)argc, sizeof *args);
    if (args == NULL)
        return DT_EXIT_FAIL;
    args[0] = argv[0];
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    dt_cli_values vals;
    int rc = dt_cli_parse("eval", eval_opts, N_EVAL_OPTS, argc - 1, args, cfg, &vals, 0);
    free(args);
    if (rc != DT_EXIT_OK)
        return rc;
    /* Evaluation only, on any number of ranks: the checkpoint's global batch is kept so that
     * the set fits the trainer; nothing trains and nothing is written. */
    cfg->train.epochs = 0;
    cfg->train.max_steps = 0;
    cfg->train.eval = 1;
    cfg->checkpoint.dir[0] = '\0';
    cfg->parallel.global_batch = m->global_batch;
    if (cfg->train.threads == 0)
        cfg->train.threads = dt_cli_default_threads();
    return DT_EXIT_OK;
}

int dt_cmd_eval(int argc, char **argv)
{
    if (wants_help(argc, argv) || argc < 2 || argv[1][0] == '-') {
        FILE *out = wants_help(argc, argv) ? stdout : stderr;
        dt_cli_print_help(out, "dtrain eval CKPT [options]",
                          "Test loss and accuracy of a checkpoint's weights, with the model and "
                          "data of the\nconfig it was written with (one process, or any layout "
                          "under mpirun).",
                          eval_opts, N_EVAL_OPTS, 0);
        return out == stdout ? DT_EXIT_OK : DT_EXIT_USAGE;
    }
    char dir[4096];
    dt_ckpt_manifest m;
    dt_config cfg = dt_config_default();
    dt_trainer *t = NULL;
    double loss = 0, acc = 0;
    int rc = find_set(argv[1], dir, sizeof dir, &m);
    if (rc == DT_EXIT_OK)
        rc = eval_config(argc, argv, dir, &m, &cfg);
    if (rc != DT_EXIT_OK)
        return rc;
    dt_cli_world world;
    rc = dt_cli_world_open(&world, &argc, &argv, &cfg);
    if (rc != DT_EXIT_OK)
        return rc;
    if (dt_trainer_create(&cfg, world.comm, &t) != DT_OK ||
        dt_trainer_load_checkpoint(t, dir) != DT_OK ||
        dt_trainer_evaluate(t, &loss, &acc) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        dt_trainer_free(t);
        return dt_cli_world_fail(&world, DT_EXIT_FAIL);
    }
    if (world.rank == 0) {
        printf("checkpoint %s (step %lld): test loss %.6f", dir, (long long)m.step, loss);
        if (acc == acc)
            printf("  test accuracy %.4f", acc);
        printf("  (%lld test samples)\n", (long long)dt_trainer_test_set(t)->n);
    }
    dt_trainer_free(t);
    dt_cli_world_close(&world);
    return DT_EXIT_OK;
}
