/* options.c — one table per subcommand drives parsing and --help, so that
 * the help text cannot drift from the parser. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char *dt_cli_string(const dt_cli_values *v, const char *slot)
{
    for (int i = 0; i < v->nstrings; i++)
        if (strcmp(v->string_keys[i], slot) == 0)
            return v->strings[i];
    return NULL;
}

int dt_cli_flag(const dt_cli_values *v, const char *slot)
{
    for (int i = 0; i < v->nflags; i++)
        if (strcmp(v->flags[i], slot) == 0)
            return 1;
    return 0;
}

static const dt_cli_option *find_opt(const dt_cli_option *opts, int nopts, const char *name,
                                     size_t len)
{
    for (int i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static int apply_key(dt_config *cfg, const char *key, const char *value, const char *origin)
{
    DT_ASSERT(cfg != NULL); /* a table with config options needs a config */
    /* Sized to the value: a fixed buffer cut an overlong one, and the config then judged
     * (and named the length of) what was left. */
    const size_t n = strlen(key) + strlen(value) + 2;
    char *buf = malloc(n);
    if (buf == NULL) {
        fprintf(stderr, "dtrain: %s: out of memory for its value\n", origin);
        return DT_EXIT_FAIL;
    }
    snprintf(buf, n, "%s=%s", key, value);
    const dt_status st = dt_config_set(cfg, buf, origin);
    free(buf);
    if (st != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

/* `a` is an option: "--name", "--name=value", or a short "-x" (whose value is always the
 * next argument). A lone "-" is an argument. */
static int is_option(const char *a)
{
    return a[0] == '-' && a[1] != '\0';
}

/* A table that takes --strategy also takes the options of the strategies' own settings,
 * from the registry (dt_strategy_setting_describe): a strategy adds its options without an
 * edit here. */
static int takes_strategy_options(const dt_cli_option *opts, int nopts)
{
    return find_opt(opts, nopts, "--strategy", strlen("--strategy")) != NULL;
}

/* The option that `a` names (*eq: its '=' in "--name=value", else NULL) into *out; 0 when
 * there is none. */
static int lookup(const dt_cli_option *opts, int nopts, const char *a, const char **eq,
                  dt_cli_option *out)
{
    *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    const size_t len = *eq != NULL ? (size_t)(*eq - a) : strlen(a);
    const dt_cli_option *o = find_opt(opts, nopts, a, len);
    if (o != NULL) {
        *out = *o;
        return 1;
    }
    dt_strategy_setting_info si;
    for (int j = 0; takes_strategy_options(opts, nopts) && j < dt_strategy_setting_count(); j++)
        if (dt_strategy_setting_describe(j, &si) == DT_OK && strlen(si.option) == len &&
            strncmp(si.option, a, len) == 0) {
            *out = (dt_cli_option){si.option, si.arg, DT_OPT_CONFIG_KEY, si.key, si.help};
            return 1;
        }
    return 0;
}

/* Pass 1: validates every option's shape and finds --help and the config file, so that the
 * file applies before any override. Returns -1 for --help. */
static int scan_args(const char *cmd, const dt_cli_option *opts, int nopts, int argc, char **argv,
                     dt_cli_values *vals, int allow_positional)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        if (is_option(a)) {
            const char *eq = NULL;
            dt_cli_option found;
            const dt_cli_option *o = lookup(opts, nopts, a, &eq, &found) ? &found : NULL;
            if (o == NULL) {
                fprintf(stderr, "dtrain %s: unknown option '%s' (see dtrain %s --help)\n", cmd, a,
                        cmd);
                return DT_EXIT_USAGE;
            }
            if (o->metavar != NULL && eq == NULL) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "dtrain %s: option %s needs a value (%s)\n", cmd, o->name,
                            o->metavar);
                    return DT_EXIT_USAGE;
                }
                i++;
            } else if (o->metavar == NULL && eq != NULL) {
                fprintf(stderr, "dtrain %s: option %s takes no value\n", cmd, o->name);
                return DT_EXIT_USAGE;
            }
            continue;
        }
        if (!allow_positional || vals->positional != NULL) {
            fprintf(stderr, "dtrain %s: unexpected argument '%s'\n", cmd, a);
            return DT_EXIT_USAGE;
        }
        vals->positional = a;
    }
    return DT_EXIT_OK;
}

/* Keeps a STRING option's value in its slot (the last one given wins) or marks a FLAG. */
static void keep_value(const dt_cli_option *o, const char *value, dt_cli_values *vals)
{
    if (o->kind == DT_OPT_FLAG) {
        if (!dt_cli_flag(vals, o->key)) {
            DT_ASSERT(vals->nflags < DT_CLI_MAX_SLOTS);
            vals->flags[vals->nflags++] = o->key;
        }
        return;
    }
    int k = 0;
    while (k < vals->nstrings && strcmp(vals->string_keys[k], o->key) != 0)
        k++;
    DT_ASSERT(k < DT_CLI_MAX_SLOTS); /* dt_cli_parse checks the table */
    vals->string_keys[k] = o->key;
    vals->strings[k] = value;
    if (k == vals->nstrings)
        vals->nstrings++;
}

/* Applies one option (already validated by scan_args). */
static int apply_option(const dt_cli_option *o, const char *value, dt_config *cfg,
                        dt_cli_values *vals)
{
    switch (o->kind) {
    case DT_OPT_CONFIG_KEY:
        return apply_key(cfg, o->key, value, o->name);
    case DT_OPT_CONFIG_ON:
        return apply_key(cfg, o->key, "on", o->name);
    case DT_OPT_SET:
        DT_ASSERT(cfg != NULL);
        if (dt_config_set(cfg, value, "--set") != DT_OK) {
            fprintf(stderr, "dtrain: %s\n", dt_last_error());
            return DT_EXIT_USAGE;
        }
        return DT_EXIT_OK;
    case DT_OPT_STRING:
    case DT_OPT_FLAG:
        keep_value(o, value, vals);
        return DT_EXIT_OK;
    }
    return DT_EXIT_OK;
}

int dt_cli_parse(const char *cmd, const dt_cli_option *opts, int nopts, int argc, char **argv,
                 dt_config *cfg, dt_cli_values *vals, int allow_positional)
{
    memset(vals, 0, sizeof *vals);
    /* One slot per STRING or FLAG option of the table: a table with more is a programmer's
     * mistake, caught here on every run rather than by a dropped option. */
    int nslots = 0;
    for (int k = 0; k < nopts; k++)
        nslots += opts[k].kind == DT_OPT_STRING || opts[k].kind == DT_OPT_FLAG;
    DT_ASSERT(nslots <= DT_CLI_MAX_SLOTS);
    int rc = scan_args(cmd, opts, nopts, argc, argv, vals, allow_positional);
    if (rc != DT_EXIT_OK)
        return rc;
    if (vals->positional != NULL && dt_config_load(vals->positional, cfg) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    /* Pass 2: apply options in order. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!is_option(a))
            continue;
        const char *eq = NULL;
        dt_cli_option o;
        DT_ASSERT(lookup(opts, nopts, a, &eq, &o)); /* scan_args found it */
        const char *value = NULL;
        if (o.metavar != NULL)
            value = eq ? eq + 1 : argv[++i];
        if ((rc = apply_option(&o, value, cfg, vals)) != DT_EXIT_OK)
            return rc;
    }
    return DT_EXIT_OK;
}

static int key_index(const char *key)
{
    for (int i = 0; i < dt_config_key_count(); i++)
        if (strcmp(dt_config_key_name(i), key) == 0)
            return i;
    return -1;
}

void dt_cli_print_help(FILE *out, const char *usage, const char *summary, const dt_cli_option *opts,
                       int nopts, int keys)
{
    const dt_config def = dt_config_default();
    fprintf(out, "usage: %s\n\n%s\n\noptions:\n", usage, summary);
    const int nsettings = takes_strategy_options(opts, nopts) ? dt_strategy_setting_count() : 0;
    for (int i = 0; i < nopts + nsettings; i++) {
        dt_cli_option setting = {0};
        dt_strategy_setting_info si;
        if (i >= nopts && dt_strategy_setting_describe(i - nopts, &si) == DT_OK)
            setting = (dt_cli_option){si.option, si.arg, DT_OPT_CONFIG_KEY, si.key, si.help};
        const dt_cli_option *o = i < nopts ? &opts[i] : &setting;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(out, "  %-24s %s", left, o->help);
        if (o->kind == DT_OPT_CONFIG_KEY || o->kind == DT_OPT_CONFIG_ON) {
            int k = key_index(o->key);
            if (k >= 0) {
                char val[256];
                dt_config_key_format(&def, k, val, sizeof val);
                fprintf(out, " (%s; default %s)", o->key, val);
            }
        }
        fputc('\n', out);
    }
    if (nsettings > 0 || takes_strategy_options(opts, nopts)) {
        fprintf(out, "\nstrategies (--strategy S; each one's options are above):\n");
        for (int i = 0; i < dt_strategy_count(); i++)
            fprintf(out, "  %-24s %s\n", dt_strategy_name(i), dt_strategy_help(i));
    }
    if (!keys)
        return;
    fprintf(out, "\nconfig keys (in a CONFIG file as [section] key = value, or --set "
                 "section.key=value), with their defaults:\n");
    for (int i = 0; i < dt_config_key_count(); i++) {
        char val[1024];
        dt_config_key_format(&def, i, val, sizeof val);
        fprintf(out, "  %-24s %s\n  %-24s   default: %s\n", dt_config_key_name(i),
                dt_config_key_help(i), "", val);
    }
}

int dt_cli_launched(void)
{
    static const char *vars[] = {
        "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",           "PMI_SIZE", "PMI_RANK",
        "MPI_LOCALNRANKS",      "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL)
            return 1;
    return 0;
}

int dt_cli_local_ranks(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                 "SLURM_NTASKS_PER_NODE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && atoi(v) > 0)
            return atoi(v);
    }
    return 1;
}

int dt_cli_default_threads(void)
{
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env != NULL && atoi(env) > 0)
        return atoi(env);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int per = (int)(cores > 0 ? cores : 1) / dt_cli_local_ranks();
    return per > 0 ? per : 1;
}
