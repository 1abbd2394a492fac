/* registry.c — the strategies dtrain knows, one const row each (registry.h), and what
 * follows from the rows alone: the names --strategy takes, the settings they add, the
 * options' default and the verdict on options and layout that every rank computes before
 * any message (dt_strategy_check).
 *
 * Adding a strategy: its file in src/parallel/ (its vtable, its check, its constructor and
 * its settings) and one row below; docs/ARCHITECTURE.md walks through local SGD's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/registry.h"
#include "parallel/strategy_impl.h"

/* The rows, each in its strategy's file (registry.h). Adding a strategy: its file, and
 * one line here and one in the table. */
extern const dt_strategy_def dt_ddp_def, dt_ps_def, dt_fedavg_def;
extern const dt_strategy_def dt_localsgd_def;

static const dt_strategy_def *const rows[] = {&dt_ddp_def, &dt_ps_def, &dt_fedavg_def,
                                              &dt_localsgd_def};

#define NROWS ((int)(sizeof rows / sizeof rows[0]))

/* Why a shared option has no effect outside its users, where "it applies to --strategy
 * ..." does not say it all. */
static const char *const why_not[DT_SO_COUNT] = {
    [DT_SO_OVERLAP] = "its gradients are all-reduced in buckets",
    [DT_SO_BUCKET_CAP_MB] = "its gradients are all-reduced in buckets",
    [DT_SO_FIRST_BUCKET_MB] = "its gradients are all-reduced in buckets",
    [DT_SO_MICRO_BATCHES] = "fedavg's clients take local steps of --batch samples",
    [DT_SO_ACCUMULATION] = "fedavg's clients take local steps of --batch samples",
    [DT_SO_LAST_BATCH] = "fedavg's rounds are its clients' local epochs or steps",
    [DT_SO_LR_SCALING] = "fedavg's clients each train at the schedule's rate",
    [DT_SO_ERROR_FEEDBACK] = "fedavg's clients keep no state between rounds",
    [DT_SO_COMPRESS_WARMUP] = "fedavg compresses every round's client updates",
    [DT_SO_SEQUENCE_PARALLEL] = "it shares the positions of a GPT's blocks, which only ddp "
                                "trains",
    [DT_SO_CLIP_NORM] = "it does not clip yet",
};

int dt_strategy_def_count(void)
{
    return NROWS;
}

const dt_strategy_def *dt_strategy_def_at(int i)
{
    return i >= 0 && i < NROWS ? rows[i] : NULL;
}

int dt_strategy_index(const char *name)
{
    for (int i = 0; name != NULL && i < NROWS; i++)
        if (strcmp(rows[i]->name, name) == 0)
            return i;
    return -1;
}

const dt_strategy_def *dt_strategy_find(const char *name)
{
    return dt_strategy_def_at(dt_strategy_index(name));
}

int dt_strategy_count(void)
{
    return NROWS;
}

const char *dt_strategy_name(int i)
{
    return i >= 0 && i < NROWS ? rows[i]->name : NULL;
}

const char *dt_strategy_help(int i)
{
    return i >= 0 && i < NROWS ? rows[i]->help : NULL;
}

int dt_strategy_equal_copies(int i)
{
    return i >= 0 && i < NROWS && rows[i]->equal_copies;
}

/* ---- the settings the rows add, numbered across the rows ------------------------------ */

int dt_strategy_setting_count(void)
{
    int n = 0;
    for (int i = 0; i < NROWS; i++)
        n += rows[i]->nsettings;
    return n;
}

/* Setting j's row and its place in the row, or -1. */
static int locate(int j, int *k)
{
    for (int i = 0; j >= 0 && i < NROWS; i++) {
        if (j < rows[i]->nsettings) {
            *k = j;
            return i;
        }
        j -= rows[i]->nsettings;
    }
    return -1;
}

const dt_strategy_setting *dt_strategy_setting_at(int j)
{
    int k = 0, i = locate(j, &k);
    DT_ASSERT(i >= 0);
    return &rows[i]->settings[k];
}

const dt_strategy_def *dt_strategy_setting_owner(int j)
{
    int k = 0, i = locate(j, &k);
    DT_ASSERT(i >= 0);
    return rows[i];
}

int dt_strategy_setting_find(const char *key)
{
    for (int j = 0; j < dt_strategy_setting_count(); j++)
        if (strcmp(dt_strategy_setting_at(j)->key, key) == 0)
            return j;
    return -1;
}

int dt_strategy_setting_by_option(const char *option)
{
    for (int j = 0; j < dt_strategy_setting_count(); j++)
        if (strcmp(dt_strategy_setting_at(j)->option, option) == 0)
            return j;
    return -1;
}

_Static_assert(DT_SO_COUNT <= 32, "dt_strategy_def.uses holds one bit per option");

dt_strategy_options dt_strategy_options_default(void)
{
    dt_strategy_options o;
    memset(&o, 0, sizeof o);
    o.strategy = rows[0]->name;
    o.micro_batches = 1;
    /* 256 KiB of weights: below it a split saves little memory and costs a collective
     * of activations per step (docs/TENSOR_PARALLEL.md). */
    o.tp_min_weights = 65536;
    o.overlap = 1;
    o.bucket_cap_mb = 25.0; /* torch.nn.parallel.DistributedDataParallel's defaults */
    o.first_bucket_mb = 1.0;
    o.servers = 1;
    o.staleness = 0;
    o.compress = (dt_compress_options){.kind = DT_COMPRESS_NONE, .error_feedback = 1};
    o.clients = 10;
    o.clients_per_round = 10;
    o.local_epochs = 1;
    o.local_steps = 0;
    o.rounds = 10;
    o.partition = (dt_fed_partition){.kind = DT_FED_IID};
    o.fedprox_mu = 0.0;
    o.seed = 1;
    for (int j = 0; j < dt_strategy_setting_count(); j++) {
        const dt_strategy_setting *d = dt_strategy_setting_at(j);
        o.settings[o.nsettings++] = (dt_strategy_setting_value){d->key, d->def, NULL};
    }
    return o;
}

dt_status dt_strategy_options_set(dt_strategy_options *o, const char *key, double value,
                                  const char *given)
{
    DT_ASSERT(o != NULL && key != NULL);
    const int j = dt_strategy_setting_find(key);
    if (j < 0)
        return dt_fail(DT_ERR_INVALID, "%s: no strategy has such a setting", key);
    const dt_strategy_setting *d = dt_strategy_setting_at(j);
    const char *name = given != NULL ? given : key;
    if (!(value >= d->lo && value <= d->hi))
        return dt_fail(DT_ERR_INVALID, "%s: %g is out of range (must be in [%g, %g])", name, value,
                       d->lo, d->hi);
    if (d->type == DT_SETTING_INT && value != floor(value))
        return dt_fail(DT_ERR_INVALID, "%s: %g is not an integer", name, value);
    for (int k = 0; k < o->nsettings; k++)
        if (strcmp(o->settings[k].key, key) == 0) {
            o->settings[k].value = value;
            o->settings[k].given = given;
            return DT_OK;
        }
    /* Options made before a setting existed (a program's own struct): append it. */
    if (o->nsettings >= DT_STRATEGY_SETTINGS_MAX)
        return dt_fail(DT_ERR_INVALID, "%s: more than %d strategy settings", key,
                       DT_STRATEGY_SETTINGS_MAX);
    o->settings[o->nsettings++] = (dt_strategy_setting_value){d->key, value, given};
    return DT_OK;
}

_Static_assert(DT_STRATEGY_SETTINGS_MAX >= 2, "room for the registry's settings");

/* ---- the options' verdict ------------------------------------------------------------
 * Every rank computes the same verdict from the same numbers, before any message. An option
 * given explicitly (o->given) that has no effect in the setup is refused naming it as the
 * user wrote it and what it needs; defaults are never judged (docs/USER_GUIDE.md). */

/* "ddp", "ddp and ps", "ddp, ps and fedavg": the rows whose `uses` has bit, or (bit 0) the
 * row `only`. */
static void users_text(uint32_t bit, int only, char *buf, size_t nbytes)
{
    int n = 0, total = 0;
    for (int i = 0; i < NROWS; i++)
        total += bit != 0 ? (rows[i]->uses & bit) != 0 : i == only;
    buf[0] = '\0';
    for (int i = 0; i < NROWS; i++) {
        if (bit != 0 ? !(rows[i]->uses & bit) : i != only)
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, nbytes - used, "%s%s",
                 n == 0           ? ""
                 : n == total - 1 ? " and "
                                  : ", ",
                 rows[i]->name);
        n++;
    }
}

/* The options and settings given that have no effect under row `def`. */
static dt_status refuse_foreign(const dt_strategy_options *o, const dt_strategy_def *def)
{
    char users[96];
    for (int opt = 0; opt < DT_SO_COUNT; opt++) {
        const char *given = o->given[opt];
        if (given == NULL || (def->uses & DT_SO_BIT(opt)))
            continue;
        users_text(DT_SO_BIT(opt), -1, users, sizeof users);
        const char *why = why_not[opt];
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect under --strategy %s: it applies to --strategy %s%s%s%s",
                       given, def->name, users, why ? " (" : "", why ? why : "", why ? ")" : "");
    }
    for (int k = 0; k < o->nsettings; k++) {
        const int j = dt_strategy_setting_find(o->settings[k].key);
        if (o->settings[k].given == NULL || j < 0 || dt_strategy_setting_owner(j) == def)
            continue;
        users_text(0, dt_strategy_index(dt_strategy_setting_owner(j)->name), users, sizeof users);
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect under --strategy %s: it applies to "
                       "--strategy %s",
                       o->settings[k].given, def->name, users);
    }
    return DT_OK;
}

/* What the grid's axes and the compression mode decide, under any strategy. */
static dt_status refuse_without_axis(const dt_strategy_options *o, int tp, int pp)
{
    const char *g = NULL;
    if ((g = o->given[DT_SO_TP_MIN_WEIGHTS]) != NULL && tp <= 1)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without tensor parallelism: it applies to --tp 2 or "
                       "more",
                       g);
    if ((g = o->given[DT_SO_SEQUENCE_PARALLEL]) != NULL && tp <= 1)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without tensor parallelism: it shares each block's "
                       "positions among the --tp ranks (--tp 2 or more)",
                       g);
    if ((g = o->given[DT_SO_PP_SCHEDULE]) != NULL && pp <= 1)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without a pipeline: it applies to --pp 2 or more", g);
    if ((g = o->given[DT_SO_COMPRESS_WARMUP]) != NULL && o->compress.kind == DT_COMPRESS_NONE)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect without --compress: it delays a compression mode "
                       "(fp16, bf16, topk:R or powersgd:K)",
                       g);
    if ((g = o->given[DT_SO_ERROR_FEEDBACK]) != NULL && o->compress.kind != DT_COMPRESS_TOPK &&
        o->compress.kind != DT_COMPRESS_POWERSGD) {
        char mode[64];
        dt_compress_format(&o->compress, mode, sizeof mode);
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect with --compress %s: it applies to topk:R and "
                       "powersgd:K, which leave part of each gradient unsent",
                       g, mode);
    }
    return DT_OK;
}

dt_status dt_strategy_check(const dt_strategy_options *o, int world)
{
    DT_ASSERT(o != NULL && world >= 0);
    const int tp = o->tp > 0 ? o->tp : 1, pp = o->pp > 0 ? o->pp : 1;
    const dt_strategy_def *def = dt_strategy_find(o->strategy != NULL ? o->strategy : "ddp");
    if (def == NULL)
        return dt_fail(DT_ERR_INVALID, "parallel.strategy: unknown strategy '%s'", o->strategy);
    if (world > 0 && tp > world)
        return dt_fail(DT_ERR_INVALID, "parallel.tp: %d tensor-parallel ranks in a job of %d", tp,
                       world);
    if (world > 0 && pp > world)
        return dt_fail(DT_ERR_INVALID, "parallel.pp: %d pipeline stages in a job of %d ranks", pp,
                       world);
    if ((int)o->pp_schedule < 0 || o->pp_schedule >= DT_PP_SCHEDULE_COUNT)
        return dt_fail(DT_ERR_INVALID, "parallel.pp_schedule: unknown schedule %d",
                       (int)o->pp_schedule);
    /* fp16 and bf16 are elementwise and keep no state: a dp group's exchange is the same
     * whatever tp and pp cut (each rank's shard, each stage's tensors), and ZeRO-1's and
     * ZeRO-3's reduce-scatters sum the same 16-bit values as the all-reduce. top-k and PowerSGD
     * choose across a buffer and keep a residual per replica, which tp and pp would split,
     * and their exchanges are all-gathers and all-reduces, not a reduce-scatter. */
    const int halves = o->compress.kind == DT_COMPRESS_FP16 || o->compress.kind == DT_COMPRESS_BF16;
    if (o->compress.kind != DT_COMPRESS_NONE && !halves && (tp > 1 || pp > 1 || o->zero)) {
        /* Only what the run set: "--tp 2", not "tp 2, pp 1 or ZeRO 0". */
        char with[64] = "";
        size_t used = 0;
        if (tp > 1)
            used += (size_t)snprintf(with + used, sizeof with - used, "tp %d", tp);
        if (pp > 1)
            used += (size_t)snprintf(with + used, sizeof with - used, "%spp %d",
                                     used > 0 ? ", " : "", pp);
        if (o->zero)
            snprintf(with + used, sizeof with - used, "%sZeRO-%d", used > 0 ? ", " : "", o->zero);
        char mode[48];
        dt_compress_format(&o->compress, mode, sizeof mode);
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress: %s compresses the gradients of plain data "
                       "parallelism (fp16 and bf16 also with tp, pp, ZeRO-1 and ZeRO-3), not yet "
                       "with %s",
                       mode, with);
    }
    /* By value, not only when given: a program's own options must not skip clipping. */
    if (o->clip_norm > 0 && !(def->uses & DT_SO_USES_CLIP))
        return dt_fail(DT_ERR_UNSUPPORTED, "%s: clipping under --strategy %s is not supported: %s",
                       o->given[DT_SO_CLIP_NORM] != NULL ? o->given[DT_SO_CLIP_NORM]
                                                         : "optim.clip_norm",
                       def->name, why_not[DT_SO_CLIP_NORM]);
    dt_status st = refuse_foreign(o, def);
    if (st == DT_OK)
        st = def->check(o, world, tp, pp);
    /* After the strategy's own: "applies to --strategy ps" says more than "needs --compress". */
    return st != DT_OK ? st : refuse_without_axis(o, tp, pp);
}

int dt_strategy_apart(const dt_strategy_options *o)
{
    const dt_strategy_def *def = dt_strategy_find(o->strategy != NULL ? o->strategy : "ddp");
    return def != NULL && def->apart != NULL ? def->apart(o) : 0;
}

dt_status dt_strategy_setting_describe(int j, dt_strategy_setting_info *out)
{
    if (j < 0 || j >= dt_strategy_setting_count())
        return dt_fail(DT_ERR_INVALID, "strategy setting %d: there are %d", j,
                       dt_strategy_setting_count());
    const dt_strategy_setting *d = dt_strategy_setting_at(j);
    *out = (dt_strategy_setting_info){.strategy = dt_strategy_setting_owner(j)->name,
                                      .key = d->key,
                                      .option = d->option,
                                      .arg = d->arg,
                                      .help = d->help,
                                      .def = d->def};
    return DT_OK;
}

dt_status dt_strategy_predict(const dt_strategy_options *o, const dt_predict_input *in,
                              dt_predict_row row, void *ctx, double *seconds)
{
    DT_ASSERT(o != NULL && in != NULL && row != NULL && seconds != NULL);
    const dt_strategy_def *def = dt_strategy_find(o->strategy != NULL ? o->strategy : "ddp");
    *seconds = 0.0;
    if (def == NULL)
        return dt_fail(DT_ERR_INVALID, "parallel.strategy: unknown strategy '%s'", o->strategy);
    if (def->predict == NULL)
        return dt_fail(DT_ERR_UNSUPPORTED, "--strategy %s: %s", def->name,
                       def->no_plan != NULL ? def->no_plan : "its messages are not modelled");
    return def->predict(o, in, row, ctx, seconds);
}
