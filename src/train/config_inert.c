/* config_inert.c — keys set explicitly that would have no effect in the setup the config
 * describes. A typo'd or misplaced setting (--checkpoint-every without --checkpoint-dir,
 * optim.momentum under adam) must not run silently as if it did something: dt_config_check
 * refuses it, naming the key as the user wrote it (dt_config_given: "--lr", "optim.lr
 * (run.ini:12)") and what it needs. Defaults are never judged, and neither is the number
 * of ranks: the verdict is the config's alone, the same on every rank of a job.
 *
 * The parallel strategies judge the options they own (dt_strategy_check in
 * src/parallel/strategy.c); this file judges the data, optimizer, schedule, checkpoint and
 * pipeline-split keys. docs/USER_GUIDE.md states the rule. */
#include <stdarg.h>
#include <stdio.h>

#include "train/config_internal.h"

/* Fails when `key` was given and has no effect (`effective` 0); the message is "<how it
 * was given> has no effect <why>". */
static dt_status judge(const dt_config *c, const char *key, int effective, const char *why, ...)
{
    const char *given = dt_config_given(c, key);
    if (given == NULL || effective)
        return DT_OK;
    char text[512];
    va_list ap;
    va_start(ap, why);
    vsnprintf(text, sizeof text, why, ap);
    va_end(ap);
    return dt_fail(DT_ERR_INVALID, "config: %s has no effect %s", given, text);
}

static const char *data_kind_name(dt_data_kind k)
{
    return k == DT_DATA_IDX    ? "idx"
           : k == DT_DATA_CSV  ? "csv"
           : k == DT_DATA_TEXT ? "text"
                               : "synthetic";
}

static dt_status judge_data(const dt_config *c)
{
    dt_status st = DT_OK;
    const dt_data_kind kind = c->data.kind;
    const char *now = data_kind_name(kind);
    static const char *const csv_keys[] = {"data.train_file", "data.test_file", "data.csv_header",
                                           "data.csv_targets", "data.csv_labels"};
    static const char *const synth_keys[] = {"data.synth_samples", "data.synth_features",
                                             "data.synth_targets", "data.synth_noise",
                                             "data.synth_seed"};
    DT_TRY(judge(c, "data.dir", kind == DT_DATA_IDX,
                 "with data.kind %s: it is the directory of data.kind idx's files", now));
    /* CSV and synthetic features are floats already: nothing scales them. */
    DT_TRY(judge(c, "data.mean", kind == DT_DATA_IDX,
                 "with data.kind %s: it scales data.kind idx's uint8 pixels", now));
    DT_TRY(judge(c, "data.std", kind == DT_DATA_IDX,
                 "with data.kind %s: it scales data.kind idx's uint8 pixels", now));
    for (size_t i = 0; i < sizeof csv_keys / sizeof csv_keys[0]; i++)
        DT_TRY(judge(c, csv_keys[i], kind == DT_DATA_CSV,
                     "with data.kind %s: it applies to data.kind csv", now));
    for (size_t i = 0; i < sizeof synth_keys / sizeof synth_keys[0]; i++)
        DT_TRY(judge(c, synth_keys[i], kind == DT_DATA_SYNTH_LINREG,
                     "with data.kind %s: it applies to data.kind synthetic", now));
    if (kind == DT_DATA_CSV)
        DT_TRY(judge(c, "data.test_samples", c->data.test_file[0] == '\0',
                     "with data.test_file set: the test samples are that file's"));
    else
        DT_TRY(judge(c, "data.test_samples", kind == DT_DATA_SYNTH_LINREG,
                     "with data.kind %s: it applies to data.kind synthetic, or csv without "
                     "data.test_file",
                     now));
    DT_TRY(judge(c, "data.text_files", kind == DT_DATA_TEXT,
                 "with data.kind %s: it names data.kind text's files", now));
    DT_TRY(judge(c, "data.val_fraction", kind == DT_DATA_TEXT,
                 "with data.kind %s: it splits data.kind text's bytes", now));
    /* Text windows are drawn at random by (seed, step, window) whatever data.shuffle says. */
    DT_TRY(judge(c, "data.shuffle", kind != DT_DATA_TEXT,
                 "with data.kind text: its training windows are always drawn at random "
                 "(text.h)"));
    DT_TRY(judge(c, "model.block_size", kind == DT_DATA_TEXT,
                 "with data.kind %s: it is data.kind text's window (the other models' input "
                 "shape is their data's)",
                 now));
    DT_TRY(judge(c, "data.num_classes",
                 kind == DT_DATA_IDX || (kind == DT_DATA_CSV && c->data.csv_labels),
                 "with data.kind %s%s: it applies to class labels (data.kind idx, or csv with "
                 "data.csv_labels on)",
                 now, kind == DT_DATA_CSV ? " and data.csv_labels off" : ""));
fail:
    return st;
}

static dt_status judge_optim(const dt_config *c)
{
    dt_status st = DT_OK;
    const int sgd = c->optim.kind == DT_OPTIM_SGD;
    const char *now = dt_optim_kind_name(c->optim.kind);
    static const char *const sgd_keys[] = {"optim.momentum", "optim.dampening", "optim.nesterov"};
    static const char *const adam_keys[] = {"optim.beta1", "optim.beta2", "optim.eps"};
    for (size_t i = 0; i < sizeof sgd_keys / sizeof sgd_keys[0]; i++)
        DT_TRY(judge(c, sgd_keys[i], sgd, "with optim.kind %s: it applies to sgd", now));
    for (size_t i = 0; i < sizeof adam_keys / sizeof adam_keys[0]; i++)
        DT_TRY(
            judge(c, adam_keys[i], !sgd, "with optim.kind %s: it applies to adam and adamw", now));
    const dt_sched_kind s = c->schedule.kind;
    const char *sched = dt_sched_kind_name(s);
    DT_TRY(judge(c, "schedule.step_size", s == DT_SCHED_STEP,
                 "with schedule.kind %s: it applies to step", sched));
    DT_TRY(judge(c, "schedule.gamma", s == DT_SCHED_STEP,
                 "with schedule.kind %s: it applies to step", sched));
    DT_TRY(judge(c, "schedule.total_steps", s == DT_SCHED_COSINE,
                 "with schedule.kind %s: it applies to cosine", sched));
    DT_TRY(judge(c, "schedule.min_lr", s == DT_SCHED_COSINE,
                 "with schedule.kind %s: it applies to cosine", sched));
    DT_TRY(judge(c, "schedule.warmup_start", c->schedule.warmup_steps > 0,
                 "without a warm-up: it applies to schedule.warmup_steps > 0"));
fail:
    return st;
}

static dt_status judge_checkpoint(const dt_config *c)
{
    dt_status st = DT_OK;
    static const char *const keys[] = {"checkpoint.every", "checkpoint.keep",
                                       "checkpoint.on_error"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        DT_TRY(judge(c, keys[i], c->checkpoint.dir[0] != '\0',
                     "without --checkpoint-dir (checkpoint.dir): no checkpoint is written"));
fail:
    return st;
}

dt_status dt_cfg_check_inert(const dt_config *c)
{
    dt_status st = DT_OK;
    DT_TRY(judge_data(c));
    DT_TRY(judge_optim(c));
    DT_TRY(judge_checkpoint(c));
    DT_TRY(judge(c, "train.skip_limit", !c->train.nonfinite_stop,
                 "with train.on_nonfinite stop: the first NaN or Inf ends the run"));
    DT_TRY(judge(c, "train.eval_every", c->train.eval,
                 "with train.eval off: it sets when evaluation happens"));
    /* data.val_fraction 0 leaves a text run nothing to evaluate on: its evaluations would
     * print NaN. 0 (after each epoch) and off say as much, and stay allowed. */
    const int no_val = c->data.kind == DT_DATA_TEXT && c->data.val_fraction == 0.0;
    DT_TRY(judge(c, "train.eval_every", !no_val || c->train.eval_every == 0,
                 "with data.val_fraction 0: data.kind text then keeps no validation bytes"));
    DT_TRY(judge(c, "train.eval", !no_val || !c->train.eval,
                 "with data.val_fraction 0: data.kind text then keeps no validation bytes"));
    /* The split is the config's (the trainer places the stages); the schedule the
     * strategy's. */
    DT_TRY(judge(c, "parallel.pp_split", c->parallel.pp > 1,
                 "without a pipeline: it applies to --pp 2 or more"));
    /* Without tensor parallelism the strategy's check says so (dt_strategy_check). */
    int blocks = 0;
    for (int i = 0; i < c->nlayers; i++)
        blocks += c->layers[i].kind == DT_LAYER_BLOCK;
    DT_TRY(judge(c, "parallel.sequence_parallel", blocks > 0,
                 "on a model without block layers: it shares the positions of a GPT's blocks"));
    DT_TRY(judge(c, "train.recompute", blocks > 0 || c->train.recompute != DT_RECOMPUTE_BLOCK,
                 "on a model without block layers: 'block' re-runs each transformer block's "
                 "inside (every-K and sqrt cut any model)"));
fail:
    return st;
}
