/* config.c — the built-in defaults, the INI file reader, --set, and the cross-field
 * checks. Values go through the key table in config_keys.c.
 *
 * Files are read with inih (Debian libinih) through our own line reader, which counts
 * lines, so every message names file:line even when inih itself has nothing to say:
 * an unknown [section] is reported at its header, a line too long for inih's 200-byte
 * buffer is refused (inih would silently split it into two lines), and a line that is
 * neither "key = value", "[section]", a comment nor a continuation is named with its text.
 * Loading and --set work on a copy: on failure the caller's config is unchanged. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/train.h"
#include "parallel/registry.h"
#include "train/config_internal.h"

/* The one place where the defaults live; --help prints them from here. */
dt_config dt_config_default(void)
{
    dt_config c;
    memset(&c, 0, sizeof c);

    c.data.kind = DT_DATA_IDX;
    snprintf(c.data.dir, sizeof c.data.dir, "%s", "/usr/share/datasets/fashion-mnist");
    c.data.csv_header = -1;
    c.data.csv_targets[0] = -1; /* the last column, as dt_csv_options_default() */
    c.data.n_csv_targets = 1;
    c.data.csv_labels = 0;
    c.data.num_classes = 10;
    /* transforms.Normalize((0.5,), (0.5,)) after ToTensor(), as in the seeds' example. */
    c.data.mean = 0.5;
    c.data.std = 0.5;
    c.data.synth_samples = 4096;
    c.data.synth_features = 16;
    c.data.synth_targets = 4;
    c.data.synth_noise = 0.1;
    c.data.synth_seed = 7;
    c.data.test_samples = 512;
    c.data.shuffle = 1;
    c.data.text_files[0] = '\0'; /* the fortunes corpus (text.h) */
    c.data.val_fraction = 0.1;

    /* The seeds' ConvNet, with the names its PyTorch class gives its parameters. */
    static const char *const convnet[] = {
        "conv1: conv2d 32 3", "relu",       "conv2: conv2d 64 3", "relu", "maxpool2d 2",
        "dropout 0.25",       "flatten",    "fc1: linear 128",    "relu", "dropout 0.5",
        "fc2: linear 10",     "log_softmax"};
    c.nlayers = (int)(sizeof convnet / sizeof convnet[0]);
    for (int i = 0; i < c.nlayers; i++) {
        dt_status st = dt_layer_spec_parse(convnet[i], &c.layers[i]);
        DT_ASSERT(st == DT_OK); /* a typo in the table above, not user input */
    }
    c.loss = DT_LOSS_NLL;
    c.optim = dt_optim_config_default(DT_OPTIM_ADAM);
    c.schedule = dt_schedule_default(); /* its lr (optim.lr) is Adam's default, 1e-3 */
    /* As examples/convnet.ini: cosine decay over the run at batch 32 reaches 90%. */
    c.schedule.kind = DT_SCHED_COSINE;

    c.train.epochs = 2;
    c.train.batch = 32;
    c.train.seed = 1;
    c.train.threads = 0;
    c.train.max_steps = 0;
    c.train.log_every = 0;
    c.train.eval = 1;
    c.train.nonfinite_stop = 0;
    c.train.skip_limit = 10;
    c.train.stop_signal = DT_STOP_SIGNAL_NONE;

    c.checkpoint.dir[0] = '\0';
    c.checkpoint.every = 0;
    c.checkpoint.keep = 3;
    c.checkpoint.on_error_continue = 0;

    /* The parallel and comm layers own their defaults; the config only adds its own keys. */
    const dt_strategy_options so = dt_strategy_options_default();
    c.parallel.strategy = dt_strategy_index(so.strategy);
    for (int j = 0; j < dt_strategy_setting_count(); j++)
        c.parallel.settings[j] = dt_strategy_setting_at(j)->def;
    c.parallel.dp = so.dp;
    c.parallel.tp = so.tp;
    c.parallel.tp_min_weights = so.tp_min_weights;
    c.parallel.pp = so.pp;
    c.parallel.accumulation = so.micro_batches;
    c.parallel.micro_batches = 0;
    c.parallel.pp_schedule = so.pp_schedule;
    c.parallel.pp_placement = DT_STAGES_BALANCED;
    c.parallel.n_pp_split = 0;
    c.parallel.zero = so.zero;
    c.parallel.overlap = so.overlap;
    c.parallel.servers = so.servers;
    c.parallel.staleness = so.staleness;
    c.parallel.compress = so.compress;
    c.fedavg.clients = so.clients;
    c.fedavg.clients_per_round = so.clients_per_round;
    c.fedavg.rounds = 10;
    c.fedavg.local_epochs = so.local_epochs;
    c.fedavg.local_steps = so.local_steps;
    c.fedavg.partition = (dt_fed_partition){.kind = DT_FED_IID};
    c.fedavg.fedprox_mu = so.fedprox_mu;
    c.parallel.bucket_cap_mb = so.bucket_cap_mb;
    c.parallel.first_bucket_mb = so.first_bucket_mb;
    c.parallel.global_batch = 0;
    c.parallel.last_batch = DT_LAST_BATCH_UNEVEN;
    c.parallel.lr_scaling_linear = 0;

    const dt_comm_options co = dt_comm_options_default();
    c.comm.algorithm = co.algorithm;
    c.comm.deterministic = co.deterministic;
    c.comm.timeout_s = co.timeout_s;
    c.comm.check = co.check;
    return c; /* memset above: no key given */
}

/* ---- unknown keys: a suggestion ------------------------------------------------------- */

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* "unknown key 'optim.lrr' (did you mean optim.lr?)": the closest key within two edits,
 * or the key of the same name in another section ("train.lr" -> optim.lr). */
static dt_status unknown_key(const char *key)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (int i = 0; i < dt_config_key_count(); i++) {
        size_t d = edit_distance(key, dt_config_key_name(i));
        if (d < best_d) {
            best_d = d;
            best = dt_config_key_name(i);
        }
    }
    const char *dot = strchr(key, '.');
    for (int i = 0; best == NULL && dot != NULL && i < dt_config_key_count(); i++)
        if (strcmp(dot, strchr(dt_config_key_name(i), '.')) == 0)
            best = dt_config_key_name(i);
    if (best != NULL)
        return dt_fail(DT_ERR_INVALID, "unknown key '%s' (did you mean %s?)", key, best);
    return dt_fail(DT_ERR_INVALID, "unknown key '%s' (dtrain train --help lists the keys)", key);
}

/* ---- files ---------------------------------------------------------------------------- */

#define MAX_KEYS DT_CONFIG_MAX_KEYS

typedef struct load_ctx {
    FILE *fp;
    const char *path;
    dt_config *cfg;
    int line;              /* the line inih is working on (1-based) */
    int indented;          /* that line starts with a space or a tab */
    int last_section_line; /* the last [section] header */
    int last_key_line;     /* the last line passed to the handler */
    int failed;            /* a message is recorded for fail_line */
    int fail_line;
    int first_line[MAX_KEYS]; /* where each key was first set in this file */
} load_ctx;

static void load_fail(load_ctx *c)
{
    c->failed = 1;
    c->fail_line = c->line;
}

/* Mirrors inih's reading of a line just far enough to name what inih would only count:
 * unknown sections, malformed section headers, lines with no '=' or ':'. */
static void check_raw_line(load_ctx *c, const char *text)
{
    const char *s = text;
    if (c->line == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    c->indented = *s == ' ' || *s == '\t';
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '\0' || *s == ';' || *s == '#')
        return;
    /* inih: an indented line after a key continues that key's value. */
    if (c->indented && c->last_key_line > c->last_section_line)
        return;
    size_t n = strcspn(s, "\r\n");
    if (*s == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL) {
            dt_fail(DT_ERR_INVALID, "section header '%.*s' has no ']'", (int)(n > 60 ? 60 : n), s);
            load_fail(c);
            return;
        }
        const char *a = s + 1, *b = close;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (!dt_cfg_section_known(a, (size_t)(b - a))) {
            char sections[256];
            dt_cfg_section_list(sections, sizeof sections);
            dt_fail(DT_ERR_INVALID, "unknown section [%.*s] (sections: %s)", (int)(b - a), a,
                    sections);
            load_fail(c);
            return;
        }
        c->last_section_line = c->line;
        return;
    }
    if (strcspn(s, "=:") >= n) {
        dt_fail(DT_ERR_INVALID, "'%.*s' is not 'key = value', '[section]' or a comment",
                (int)(n > 60 ? 60 : n), s);
        load_fail(c);
    }
}

/* inih's fgets-style reader: one call per line, which is how lines are counted. */
static char *read_line(char *str, int num, void *stream)
{
    load_ctx *c = stream;
    if (c->failed || fgets(str, num, c->fp) == NULL)
        return NULL;
    c->line++;
    size_t n = strlen(str);
    /* A line that fills the buffer would reach inih in pieces, each taken for a line. */
    if (n > 0 && str[n - 1] != '\n' && (n >= (size_t)num - 1)) {
        dt_fail(DT_ERR_INVALID,
                "line longer than %d characters (the INI reader's limit); "
                "split a long model.layers over indented continuation lines",
                num - 3);
        load_fail(c);
        return NULL;
    }
    check_raw_line(c, str);
    return c->failed ? NULL : str;
}

static int on_value(void *user, const char *section, const char *name, const char *value)
{
    load_ctx *c = user;
    if (c->failed)
        return 0;
    const int continued = c->indented && c->last_key_line > c->last_section_line;
    c->last_key_line = c->line;

    /* inih keeps the spaces of "[ data ]"; the reader above accepted it as [data]. */
    while (isspace((unsigned char)*section))
        section++;
    size_t slen = strlen(section);
    while (slen > 0 && isspace((unsigned char)section[slen - 1]))
        slen--;
    char key[160];
    if (slen == 0) {
        /* Before any [section], a key may be written in full: "train.epochs = 3". */
        if (strchr(name, '.') == NULL) {
            dt_fail(DT_ERR_INVALID, "key '%s' is outside any [section]", name);
            goto fail;
        }
        snprintf(key, sizeof key, "%s", name);
    } else {
        if (!dt_cfg_section_known(section, slen)) {
            char sections[256];
            dt_cfg_section_list(sections, sizeof sections);
            dt_fail(DT_ERR_INVALID, "unknown section [%.*s] (sections: %s)", (int)slen, section,
                    sections);
            goto fail;
        }
        snprintf(key, sizeof key, "%.*s.%s", (int)slen, section, name);
    }
    int k = dt_cfg_key_find(key);
    if (k < 0) {
        unknown_key(key);
        goto fail;
    }
    DT_ASSERT(k < MAX_KEYS);
    if (continued && value[0] == '[') {
        dt_fail(DT_ERR_INVALID,
                "'%s' is indented, so it continues %s: a section header must "
                "start its line",
                value, key);
        goto fail;
    }
    if (!continued) {
        if (c->first_line[k] != 0) {
            dt_fail(DT_ERR_INVALID, "%s is set twice (first at line %d)", key, c->first_line[k]);
            goto fail;
        }
        c->first_line[k] = c->line;
    }

    /* inih strips ';' comments after a space; '#' after a space is a comment too. */
    char text[256];
    snprintf(text, sizeof text, "%s", value);
    for (char *h = strchr(text, '#'); h != NULL; h = strchr(h + 1, '#')) {
        if (h > text && isspace((unsigned char)h[-1])) {
            *h = '\0';
            break;
        }
    }
    for (size_t n = strlen(text); n > 0 && isspace((unsigned char)text[n - 1]); n--)
        text[n - 1] = '\0';
    char given[DT_CONFIG_PATH_MAX + 200];
    snprintf(given, sizeof given, "%s (%s:%d)", key, c->path, c->first_line[k]);
    if (dt_cfg_key_apply(c->cfg, k, text, continued, given) != DT_OK)
        goto fail;
    return 1;
fail:
    load_fail(c);
    return 0;
}

dt_status dt_config_load(const char *path, dt_config *cfg)
{
    DT_ASSERT(path != NULL && cfg != NULL);
    DT_ASSERT(dt_config_key_count() <= MAX_KEYS);
    dt_status st = DT_OK;
    load_ctx c;
    memset(&c, 0, sizeof c);
    dt_config work = *cfg;
    c.cfg = &work;
    c.path = path;
    c.fp = fopen(path, "r");
    if (c.fp == NULL)
        return dt_fail(DT_ERR_IO, "config: %s: cannot open: %s", path, strerror(errno));

    int r = ini_parse_stream(read_line, &c, on_value, &c);
    if (ferror(c.fp)) {
        st = dt_fail(DT_ERR_IO, "config: %s:%d: read error", path, c.line);
        goto fail;
    }
    if (c.failed && (r <= 0 || r >= c.fail_line)) {
        st = DT_ERR_INVALID;
        dt_error_prefix("config: %s:%d: ", path, c.fail_line);
        goto fail;
    }
    if (r > 0) {
        st = dt_fail(DT_ERR_INVALID, "config: %s:%d: not 'key = value', '[section]' or a comment",
                     path, r);
        goto fail;
    }
    if (r < 0) {
        st = dt_fail(DT_ERR_NOMEM, "config: %s: the INI reader ran out of memory", path);
        goto fail;
    }
    fclose(c.fp);
    if (strlen(path) < sizeof work.source)
        memcpy(work.source, path, strlen(path) + 1);
    else
        snprintf(work.source, sizeof work.source, "...%s",
                 path + strlen(path) - (sizeof work.source - 4));
    *cfg = work;
    return DT_OK;
fail:
    fclose(c.fp);
    return st;
}

/* ---- --set ---------------------------------------------------------------------------- */

dt_status dt_config_set(dt_config *cfg, const char *assignment, const char *origin)
{
    DT_ASSERT(cfg != NULL && assignment != NULL);
    if (origin == NULL)
        origin = "--set";
    const char *eq = strchr(assignment, '=');
    if (eq == NULL)
        return dt_fail(DT_ERR_INVALID, "config: %s: '%s' is not section.key=value", origin,
                       assignment);
    const char *a = assignment, *b = eq;
    while (a < b && isspace((unsigned char)*a))
        a++;
    while (b > a && isspace((unsigned char)b[-1]))
        b--;
    char key[160];
    if ((size_t)(b - a) >= sizeof key)
        return dt_fail(DT_ERR_INVALID, "config: %s: key '%.40s...' is too long", origin, a);
    memcpy(key, a, (size_t)(b - a));
    key[b - a] = '\0';

    const char *v = eq + 1;
    while (isspace((unsigned char)*v))
        v++;
    size_t vn = strlen(v);
    while (vn > 0 && isspace((unsigned char)v[vn - 1]))
        vn--;
    char value[2048];
    if (vn >= sizeof value)
        return dt_fail(DT_ERR_INVALID, "config: %s: the value of %s is longer than %zu bytes",
                       origin, key, sizeof value - 1);
    memcpy(value, v, vn);
    value[vn] = '\0';

    int k = dt_cfg_key_find(key);
    if (k < 0) {
        unknown_key(key);
        dt_error_prefix("config: %s: ", origin);
        return DT_ERR_INVALID;
    }
    /* How the user wrote it: a command-line option by its own name ("--lr"), --set and any
     * other origin beside the key ("optim.lr (--set)"). */
    char given[256];
    if (strncmp(origin, "--", 2) == 0 && strcmp(origin, "--set") != 0)
        snprintf(given, sizeof given, "%s", origin);
    else
        snprintf(given, sizeof given, "%s (%s)", key, origin);
    dt_config work = *cfg;
    if (dt_cfg_key_apply(&work, k, value, 0, given) != DT_OK) {
        dt_error_prefix("config: %s: ", origin);
        return DT_ERR_INVALID;
    }
    *cfg = work;
    return DT_OK;
}

/* ---- cross-field checks --------------------------------------------------------------- */

static dt_status check_layers(const dt_config *c)
{
    if (c->nlayers < 1)
        return dt_fail(DT_ERR_INVALID, "config: model.layers: the model has no layers");
    if (c->nlayers > DT_CONFIG_MAX_LAYERS)
        return dt_fail(DT_ERR_INVALID, "config: model.layers: %d layers, at most %d", c->nlayers,
                       DT_CONFIG_MAX_LAYERS);
    for (int i = 0; i < c->nlayers; i++) {
        /* Specs filled by hand never went through the parser: format and parse them. */
        const dt_layer_spec *s = &c->layers[i];
        if ((int)s->kind < 0 || s->kind >= DT_LAYER_KIND_COUNT)
            return dt_fail(DT_ERR_INVALID, "config: model.layers: layer %d: unknown kind %d", i,
                           (int)s->kind);
        if (memchr(s->name, '\0', sizeof s->name) == NULL)
            return dt_fail(DT_ERR_INVALID,
                           "config: model.layers: layer %d: name is not "
                           "terminated",
                           i);
        char text[200];
        dt_layer_spec check;
        dt_layer_spec_format(s, text, sizeof text);
        if (dt_layer_spec_parse(text, &check) != DT_OK) {
            dt_error_prefix("config: model.layers: layer %d: ", i);
            return DT_ERR_INVALID;
        }
        if (s->kind == DT_LAYER_CAUSAL_ATTENTION && !(s->p >= 0.0 && s->p < 1.0))
            return dt_fail(DT_ERR_INVALID,
                           "config: model.layers: layer %d: causal_attention p %g is not in "
                           "[0, 1)",
                           i, s->p);
        if (s->kind == DT_LAYER_DROPOUT && !(s->p >= 0.0 && s->p <= 1.0))
            return dt_fail(DT_ERR_INVALID,
                           "config: model.layers: layer %d: dropout p %g is "
                           "not in [0, 1]",
                           i, s->p);
        for (int j = 0; j < i && s->name[0] != '\0'; j++)
            if (strcmp(s->name, c->layers[j].name) == 0)
                return dt_fail(DT_ERR_INVALID,
                               "config: model.layers: layers %d and %d are both "
                               "named '%s'",
                               j, i, s->name);
    }
    return DT_OK;
}

/* A text run (data.kind text): its window, its length in steps and the strategies that
 * train on it so far (docs/USER_GUIDE.md, "Text"). */
static dt_status check_text_run(const dt_config *c)
{
    if (c->block_size < 1)
        return dt_fail(DT_ERR_INVALID,
                       "config: model.block_size: required with data.kind text (the window of "
                       "bytes the model reads, e.g. model.block_size = 64)");
    const char *epochs = dt_config_given(c, "train.epochs");
    if (epochs != NULL)
        return dt_fail(DT_ERR_INVALID,
                       "config: %s: train.epochs does not apply to data.kind text, whose run "
                       "is counted in optimizer steps: set train.max_steps (--max-steps) instead",
                       epochs);
    /* train.epochs 0 (not given) with max_steps 0 is evaluation only (dtrain eval). */
    if (c->train.max_steps == 0 && c->train.epochs != 0)
        return dt_fail(DT_ERR_INVALID,
                       "config: train.max_steps: required with data.kind text (a text run is "
                       "counted in optimizer steps; --max-steps N)");
    /* Which strategies draw text windows is theirs to say (the registry's rows). */
    const char *name = dt_strategy_name(c->parallel.strategy);
    const dt_strategy_def *def = name != NULL ? dt_strategy_find(name) : NULL;
    if (def == NULL || !def->text)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "config: parallel.strategy %s does not train on data.kind text yet (ddp "
                       "does, with ZeRO-1, accumulation, tp and pp)",
                       name != NULL ? name : "?");
    return DT_OK;
}

static dt_status check_data(const dt_config *c)
{
    const int regression = c->loss == DT_LOSS_MSE;
    switch (c->data.kind) {
    case DT_DATA_IDX:
        if (c->data.dir[0] == '\0')
            return dt_fail(DT_ERR_INVALID, "config: data.dir: empty (data.kind idx needs the "
                                           "directory of the IDX files)");
        if (c->data.num_classes < 2)
            return dt_fail(DT_ERR_INVALID,
                           "config: data.num_classes must be >= 2 for IDX data, "
                           "got %lld",
                           (long long)c->data.num_classes);
        if (regression)
            return dt_fail(DT_ERR_INVALID,
                           "config: loss.kind mse needs regression targets, but "
                           "data.kind idx has class labels (use cross_entropy or nll)");
        break;
    case DT_DATA_CSV:
        if (c->data.train_file[0] == '\0')
            return dt_fail(DT_ERR_INVALID, "config: data.train_file: empty (data.kind csv needs "
                                           "it)");
        if (c->data.n_csv_targets < 1 || c->data.n_csv_targets > DT_CONFIG_MAX_TARGETS)
            return dt_fail(DT_ERR_INVALID, "config: data.csv_targets: %d columns, need 1 to %d",
                           c->data.n_csv_targets, DT_CONFIG_MAX_TARGETS);
        if (c->data.csv_labels && c->data.n_csv_targets != 1)
            return dt_fail(DT_ERR_INVALID,
                           "config: data.csv_labels needs exactly one column in "
                           "data.csv_targets, got %d",
                           c->data.n_csv_targets);
        if (c->data.csv_labels && regression)
            return dt_fail(DT_ERR_INVALID, "config: loss.kind mse needs regression targets, but "
                                           "data.csv_labels is on");
        if (!c->data.csv_labels && !regression)
            return dt_fail(DT_ERR_INVALID,
                           "config: loss.kind %s needs class labels: set "
                           "data.csv_labels = on, or use loss.kind mse",
                           dt_loss_kind_name(c->loss));
        if (c->data.test_file[0] == '\0' && c->data.test_samples < 0)
            return dt_fail(DT_ERR_INVALID, "config: data.test_samples must be >= 0");
        break;
    case DT_DATA_SYNTH_LINREG:
        if (c->data.synth_samples < 1 || c->data.synth_features < 1 || c->data.synth_targets < 1)
            return dt_fail(DT_ERR_INVALID, "config: data.synth_samples, data.synth_features and "
                                           "data.synth_targets must be >= 1");
        if (c->data.test_samples < 0 || c->data.test_samples >= c->data.synth_samples)
            return dt_fail(DT_ERR_INVALID,
                           "config: data.test_samples (%lld) must be in [0, "
                           "data.synth_samples (%lld)) so that training samples remain",
                           (long long)c->data.test_samples, (long long)c->data.synth_samples);
        if (!(c->data.synth_noise >= 0.0))
            return dt_fail(DT_ERR_INVALID, "config: data.synth_noise must be >= 0");
        if (!regression)
            return dt_fail(DT_ERR_INVALID,
                           "config: loss.kind %s needs class labels, but "
                           "data.kind synthetic has regression targets (use mse)",
                           dt_loss_kind_name(c->loss));
        break;
    case DT_DATA_TEXT:
        /* The files and the windows' fit are checked where they are read (text.h). */
        if (!(c->data.val_fraction >= 0.0 && c->data.val_fraction < 1.0))
            return dt_fail(DT_ERR_INVALID, "config: data.val_fraction = %g is not in [0, 1)",
                           c->data.val_fraction);
        if (regression)
            return dt_fail(DT_ERR_INVALID, "config: loss.kind mse needs regression targets, but "
                                           "data.kind text predicts bytes (use cross_entropy)");
        return check_text_run(c);
    default:
        return dt_fail(DT_ERR_INVALID, "config: data.kind: unknown kind %d", (int)c->data.kind);
    }
    if (!(c->data.std > 0.0) || c->data.mean != c->data.mean)
        return dt_fail(DT_ERR_INVALID,
                       "config: data.std must be > 0 (got %g) and data.mean a "
                       "number",
                       c->data.std);
    return DT_OK;
}

static dt_status check_optim(const dt_config *c)
{
    if ((int)c->loss < 0 || c->loss >= DT_LOSS_KIND_COUNT)
        return dt_fail(DT_ERR_INVALID, "config: loss.kind: unknown kind %d", (int)c->loss);
    if (dt_optim_config_check(&c->optim) != DT_OK) {
        dt_error_prefix("config: ");
        return DT_ERR_INVALID;
    }
    if (c->optim.kind == DT_OPTIM_SGD && !(c->optim.dampening >= 0.0 && c->optim.dampening <= 1.0))
        return dt_fail(DT_ERR_INVALID, "config: optim.dampening must be in [0, 1], got %g",
                       c->optim.dampening);
    /* total_steps 0 asks the training loop to derive it from the epochs (dt_trainer). */
    dt_schedule s = c->schedule;
    if (s.kind == DT_SCHED_COSINE && s.total_steps == 0)
        s.total_steps = 1;
    if (dt_schedule_check(&s) != DT_OK) {
        dt_error_prefix("config: ");
        return DT_ERR_INVALID;
    }
    if (s.kind == DT_SCHED_COSINE && s.min_lr > s.lr)
        return dt_fail(DT_ERR_INVALID,
                       "config: schedule.min_lr (%g) is above optim.lr (%g): a "
                       "cosine schedule decays to min_lr",
                       s.min_lr, s.lr);
    return DT_OK;
}

static dt_status check_run(const dt_config *c)
{
    if (c->train.batch < 1)
        return dt_fail(DT_ERR_INVALID, "config: train.batch must be >= 1, got %lld",
                       (long long)c->train.batch);
    if (c->train.epochs < 0 || c->train.max_steps < 0)
        return dt_fail(DT_ERR_INVALID, "config: train.epochs and train.max_steps must be >= 0");
    if (c->train.threads < 0 || c->train.log_every < 0)
        return dt_fail(DT_ERR_INVALID, "config: train.threads and train.log_every must be >= 0");
    if (c->parallel.dp < 0 || c->parallel.tp < 0 || c->parallel.pp < 0)
        return dt_fail(DT_ERR_INVALID, "config: parallel.dp, parallel.tp and parallel.pp must "
                                       "be >= 0 (0: derive)");
    if (c->parallel.accumulation < 1)
        return dt_fail(DT_ERR_INVALID, "config: parallel.accumulation must be >= 1, got %d",
                       c->parallel.accumulation);
    if (c->parallel.micro_batches > 0 && c->parallel.accumulation > 1 &&
        c->parallel.micro_batches != c->parallel.accumulation)
        return dt_fail(DT_ERR_INVALID,
                       "config: parallel.micro_batches (%d) and parallel.accumulation (%d) "
                       "name the same thing, micro-steps per optimizer step: give one",
                       c->parallel.micro_batches, c->parallel.accumulation);
    if (c->parallel.global_batch < 0)
        return dt_fail(DT_ERR_INVALID, "config: parallel.global_batch must be >= 0");
    if ((int)c->parallel.last_batch < 0 || c->parallel.last_batch >= DT_LAST_BATCH_COUNT)
        return dt_fail(DT_ERR_INVALID, "config: parallel.last_batch: unknown mode %d",
                       (int)c->parallel.last_batch);
    if (c->parallel.lr_scaling_linear != 0 && c->parallel.lr_scaling_linear != 1)
        return dt_fail(DT_ERR_INVALID, "config: parallel.lr_scaling: unknown rule %d",
                       c->parallel.lr_scaling_linear);
    if (!(c->parallel.bucket_cap_mb > 0.0) || !(c->parallel.first_bucket_mb > 0.0))
        return dt_fail(DT_ERR_INVALID, "config: parallel.bucket_cap_mb and "
                                       "parallel.first_bucket_mb must be > 0");
    if (c->parallel.zero == 2)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "config: parallel.zero 2 (gradients sharded, parameters whole) is not "
                       "built: 1 shards the optimizer state, 3 everything");
    if (c->parallel.zero < 0 || c->parallel.zero > 3)
        return dt_fail(DT_ERR_INVALID, "config: parallel.zero must be 0, 1 or 3, got %d",
                       c->parallel.zero);
    if (c->parallel.servers < 1 || c->parallel.staleness < DT_PS_STALENESS_INF)
        return dt_fail(DT_ERR_INVALID, "config: parallel.servers must be >= 1 and "
                                       "parallel.staleness >= 0 or inf");
    /* A worker's NaN cannot stop the others mid-step without a collective per step, which
     * would synchronise them: under ps such a push is skipped by its servers and counted. */
    const dt_strategy_def *def = dt_strategy_def_at(c->parallel.strategy);
    if (def == NULL)
        return dt_fail(DT_ERR_INVALID, "config: parallel.strategy: unknown strategy %d",
                       c->parallel.strategy);
    /* The registry's settings, as a program may have filled them by hand. */
    for (int j = 0; j < dt_strategy_setting_count(); j++) {
        const dt_strategy_setting *d = dt_strategy_setting_at(j);
        const double v = c->parallel.settings[j];
        if (!(v >= d->lo && v <= d->hi) || (d->type == DT_SETTING_INT && v != (double)(int64_t)v))
            return dt_fail(DT_ERR_INVALID,
                           "config: %s: %g is out of range (must be %s in [%g, %g])", d->key, v,
                           d->type == DT_SETTING_INT ? "an integer" : "a number", d->lo, d->hi);
    }
    if (def->apart_steps != NULL && c->train.stop_signal != DT_STOP_SIGNAL_NONE) {
        dt_strategy_options so;
        dt_config_strategy_options(c, &so);
        const char *why = def->apart_steps(&so);
        if (why != NULL)
            return dt_fail(DT_ERR_UNSUPPORTED,
                           "config: train.stop_signal (--stop-on) does not apply under "
                           "parallel.strategy %s: %s",
                           def->name, why);
    }
    if (def->no_stop != NULL && c->train.nonfinite_stop)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "config: train.on_nonfinite stop does not apply under parallel.strategy "
                       "%s: %s",
                       def->name, def->no_stop);
    if ((int)c->comm.algorithm < 0 || c->comm.algorithm >= DT_COMM_ALGO_COUNT)
        return dt_fail(DT_ERR_INVALID, "config: comm.algorithm: unknown algorithm %d",
                       (int)c->comm.algorithm);
    if (!(c->comm.timeout_s > 0.0))
        return dt_fail(DT_ERR_INVALID, "config: comm.timeout must be > 0 seconds, got %g",
                       c->comm.timeout_s);
    return DT_OK;
}

/* The pipeline's layout, from the config alone: the same verdict on every rank before the
 * job communicates. (A split inside a tensor-parallel block depends on the shapes and is
 * refused when the stage is built.) */
static dt_status check_pipeline(const dt_config *c)
{
    const int pp = c->parallel.pp > 0 ? c->parallel.pp : 1;
    if ((int)c->parallel.pp_schedule < 0 || c->parallel.pp_schedule >= DT_PP_SCHEDULE_COUNT)
        return dt_fail(DT_ERR_INVALID, "config: parallel.pp_schedule: unknown schedule %d",
                       (int)c->parallel.pp_schedule);
    if (pp > c->nlayers)
        return dt_fail(DT_ERR_INVALID,
                       "config: parallel.pp: %d pipeline stages for a model of %d layers: a "
                       "stage needs at least one layer",
                       pp, c->nlayers);
    if (c->parallel.n_pp_split == 0)
        return DT_OK;
    if (c->parallel.n_pp_split != pp - 1)
        return dt_fail(DT_ERR_INVALID,
                       "config: parallel.pp_split: %d split point%s for %d stages; give the "
                       "first layer of each stage after the first (%d)",
                       c->parallel.n_pp_split, c->parallel.n_pp_split == 1 ? "" : "s", pp, pp - 1);
    for (int s = 0; s < c->parallel.n_pp_split; s++) {
        const int at = c->parallel.pp_split[s], prev = s > 0 ? c->parallel.pp_split[s - 1] : 0;
        if (at <= prev || at >= c->nlayers)
            return dt_fail(DT_ERR_INVALID,
                           "config: parallel.pp_split: stage %d would begin at layer %d; split "
                           "points must increase within 1..%d so that no stage is empty",
                           s + 1, at, c->nlayers - 1);
    }
    return DT_OK;
}

/* What the strategy decides from the config alone, before the job's size is known: the
 * same verdict dt_strategy_create gives (with the ranks' checks added), early enough for
 * the command line to report it as a usage error before any rank starts MPI. */
static dt_status check_strategy(const dt_config *c)
{
    dt_strategy_options so;
    dt_config_strategy_options(c, &so);
    dt_status st = dt_strategy_check(&so, 0);
    if (st != DT_OK)
        dt_error_prefix("config: ");
    return st;
}

int dt_config_micro_batches(const dt_config *cfg)
{
    return cfg->parallel.micro_batches > 0 ? cfg->parallel.micro_batches
                                           : cfg->parallel.accumulation;
}

dt_status dt_config_check(const dt_config *cfg)
{
    DT_ASSERT(cfg != NULL);
    dt_status st = DT_OK;
    DT_TRY(check_layers(cfg));
    DT_TRY(check_data(cfg));
    DT_TRY(check_optim(cfg));
    DT_TRY(check_run(cfg));
    DT_TRY(dt_cfg_check_inert(cfg));
    DT_TRY(check_pipeline(cfg));
    DT_TRY(check_strategy(cfg));
    return DT_OK;
fail:
    return st;
}
