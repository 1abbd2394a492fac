/* cli.h — the command-line tool's shared pieces: the subcommand table, the option table
 * that drives both parsing and --help, launcher detection and rank-0 output. */
#ifndef DT_CLI_H
#define DT_CLI_H

#include <stdio.h>

#include "dtrain/config.h"

/* Exit codes: 0 ok, 1 failure, 2 usage, 3 a training run stopped by its non-finite guard
 * (train.on_nonfinite stop, train.skip_limit): what a restart would compute again, so
 * dtrain launch does not restart it, nor a usage error; 4 a run stopped by its
 * train.stop_signal (--stop-on) before its end, its checkpoint written: asked for, so not
 * restarted either, and resumable. */
enum {
    DT_EXIT_OK = 0,
    DT_EXIT_FAIL = 1,
    DT_EXIT_USAGE = 2,
    DT_EXIT_NONFINITE = 3,
    DT_EXIT_STOPPED = 4
};

/* The file dtrain launch keeps in the checkpoint directory: the step rank 0 has reached. */
#define DT_LAUNCH_PROGRESS_NAME ".progress"

typedef enum dt_opt_kind {
    DT_OPT_CONFIG_KEY, /* --epochs N: a shorthand for --set train.epochs=N */
    DT_OPT_CONFIG_ON,  /* --comm-check: sets a boolean key to on */
    DT_OPT_SET,        /* --set key=value */
    DT_OPT_STRING,     /* --metrics FILE: stored for the command */
    DT_OPT_FLAG        /* --progress: stored as 1 */
} dt_opt_kind;

typedef struct dt_cli_option {
    const char *name;    /* "--epochs" */
    const char *metavar; /* "N", or NULL for flags */
    dt_opt_kind kind;
    const char *key; /* config key for CONFIG_KEY/CONFIG_ON; a slot name otherwise */
    const char *help;
} dt_cli_option;

/* Values of STRING and FLAG options after parsing, by slot name: one slot per distinct
 * option (a repeated option overwrites its value: the last one wins, as for config keys),
 * so a table holds at most DT_CLI_MAX_SLOTS of each kind (checked when parsing starts). */
#define DT_CLI_MAX_SLOTS 32
typedef struct dt_cli_values {
    const char *strings[DT_CLI_MAX_SLOTS];
    const char *string_keys[DT_CLI_MAX_SLOTS];
    int nstrings;
    const char *flags[DT_CLI_MAX_SLOTS];
    int nflags;
    const char *positional; /* the CONFIG argument */
} dt_cli_values;

const char *dt_cli_string(const dt_cli_values *v, const char *slot);
int dt_cli_flag(const dt_cli_values *v, const char *slot);

/* Parses argv[1..argc) of a subcommand against `opts`: the config file (first positional)
 * is loaded first, then every --set and shorthand in order. Options are "--name VALUE",
 * "--name=VALUE" and short ones ("-n VALUE"); any other argument that starts with '-' is an
 * unknown option. `cfg` may be NULL for a table of STRING and FLAG options only (no config
 * file then either). Prints a message naming the option on error and returns
 * DT_EXIT_USAGE or DT_EXIT_FAIL; DT_EXIT_OK on success; -1 when --help (or -h) was seen:
 * the caller prints the help. */
int dt_cli_parse(const char *cmd, const dt_cli_option *opts, int nopts, int argc, char **argv,
                 dt_config *cfg, dt_cli_values *vals, int allow_positional);

/* Prints the options (with each shorthand's real default from dt_config_default()) and,
 * when `keys` is set, every config key with its default. */
void dt_cli_print_help(FILE *out, const char *usage, const char *summary, const dt_cli_option *opts,
                       int nopts, int keys);

/* Numbers on the command line (cli_number.c): the whole of TEXT as a whole number, or a
 * finite real number, in [lo, hi] into *out; 1 when it is one, 0 when it is not (trailing
 * text, overflow, NaN or infinity, out of range), *out then untouched. */
int dt_cli_whole(const char *text, long long lo, long long hi, long long *out);
int dt_cli_real(const char *text, double lo, double hi, double *out);

/* Launcher detection: 1 when this process was started by mpirun/mpiexec/srun (their
 * environment variables), so MPI must be initialised; 0 for a plain run. */
int dt_cli_launched(void);
/* Ranks on this node as the launcher announces them (1 when unknown). */
int dt_cli_local_ranks(void);
/* Default BLAS threads: OPENBLAS_NUM_THREADS if set, else cores / ranks on this node. */
int dt_cli_default_threads(void);

/* The processes of this run: MPI is initialised only under a launcher (a plain run is
 * world size 1 without MPI: a singleton MPI_Init costs 0.3 s and forks a daemon). */
typedef struct dt_comm dt_comm;
typedef struct dt_cli_world {
    int mpi;        /* MPI was initialised by us */
    int rank, size; /* in the world */
    dt_comm *comm;  /* NULL without MPI */
} dt_cli_world;

int dt_cli_world_open(dt_cli_world *w, int *argc, char ***argv, const dt_config *cfg);
/* Ends the job after a failure on this rank: MPI_Abort when other ranks could wait on
 * this one, so that a mistake never becomes a hang. Returns `code` otherwise. */
int dt_cli_world_fail(dt_cli_world *w, int code);
void dt_cli_world_close(dt_cli_world *w);
/* A failure found before MPI started (a bad option or config): returns `code`, after ending
 * the job when other ranks could wait in MPI_Init for this one. Open MPI's mpirun ends a job
 * whose process exits before MPI_Init; MPICH's mpiexec (Hydra) and srun do not, so under them
 * a rank whose command line differs from the others' (MPMD, or a config file that another
 * host reads differently) initialises MPI and aborts the job with `code`. */
int dt_cli_refuse_before_mpi(int code, int *argc, char ***argv);
/* Every rank's line (up to DT_CLI_LINE_MAX - 1 characters; newlines may split it) printed
 * by rank 0 in rank order, each on its own line; an empty line prints nothing. Collective
 * over the world. */
#define DT_CLI_LINE_MAX 1024
dt_status dt_cli_print_ranks(const dt_cli_world *w, const char *line);

int dt_cmd_train(int argc, char **argv);
/* cmd_ckpt.c: the commands that read a checkpoint. */
int dt_cmd_eval(int argc, char **argv);
int dt_cmd_inspect(int argc, char **argv);
int dt_cmd_export(int argc, char **argv);
/* export_hf.c: `dtrain export CKPT DIR --format hf`. */
int dt_cli_export_hf(const char *ckpt, const char *dir);
/* cmd_generate.c: a trained GPT's continuation of a prompt. */
int dt_cmd_generate(int argc, char **argv);
/* cmd_plot.c */
int dt_cmd_plot(int argc, char **argv);
/* cmd_plan.c */
int dt_cmd_plan(int argc, char **argv);
/* `dtrain launch`: supervises `mpirun ... dtrain train` and restarts it from its newest
 * checkpoint after a failure (cmd_launch.c). */
int dt_cmd_launch(int argc, char **argv);

#endif
