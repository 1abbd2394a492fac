/* cmd_train.c — `dtrain train [CONFIG] [options]`: trains a model and reports progress,
 * per-epoch metrics, and optionally a JSON-lines metrics file and the final weights. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli/blas_core.h"
#include "cli/explain.h"
#include "cli/train_figures.h"
#include "cli/train_hooks.h"
#include "cli/tensorboard.h"
#include "cli/train_memory.h"
#include "cli/train_report.h"
#include "cli/train_resume.h"
#include "dtrain/train.h"

static const dt_cli_option train_opts[] = {
    {"--set", "KEY=VALUE", DT_OPT_SET, NULL, "override any config key (repeatable)"},
    {"--epochs", "N", DT_OPT_CONFIG_KEY, "train.epochs", "epochs to train"},
    {"--batch", "N", DT_OPT_CONFIG_KEY, "train.batch", "samples per step on each rank"},
    {"--global-batch", "N", DT_OPT_CONFIG_KEY, "parallel.global_batch",
     "samples per optimizer step over all ranks and micro-steps (0: batch x dp x accumulation)"},
    {"--lr", "X", DT_OPT_CONFIG_KEY, "optim.lr", "learning rate"},
    {"--seed", "N", DT_OPT_CONFIG_KEY, "train.seed", "seed of initialisation, shuffle, dropout"},
    {"--threads", "N", DT_OPT_CONFIG_KEY, "train.threads",
     "threads per rank, each calling BLAS single-threaded (0: OPENBLAS_NUM_THREADS, else "
     "cores / ranks on the node)"},
    {"--data", "DIR", DT_OPT_CONFIG_KEY, "data.dir", "directory of the IDX files"},
    {"--shuffle", "on|off", DT_OPT_CONFIG_KEY, "data.shuffle", "permute samples each epoch"},
    {"--max-steps", "N", DT_OPT_CONFIG_KEY, "train.max_steps",
     "stop after N optimizer steps (a text run's length: required there)"},
    {"--eval-every", "K", DT_OPT_CONFIG_KEY, "train.eval_every",
     "evaluate after every K-th optimizer step and the run's last, instead of after each epoch "
     "(0: after each epoch)"},
    {"--log-every", "N", DT_OPT_CONFIG_KEY, "train.log_every",
     "log (and record in --metrics) every N steps; 0: per epoch only"},
    {"--strategy", "S", DT_OPT_CONFIG_KEY, "parallel.strategy",
     "how the ranks share the training: one of the strategies listed below (ddp's one-rank "
     "case is a single process)"},
    {"--dp", "N", DT_OPT_CONFIG_KEY, "parallel.dp", "data-parallel ranks (0: all)"},
    {"--tp", "N", DT_OPT_CONFIG_KEY, "parallel.tp",
     "tensor-parallel ranks: large linear and conv2d layers, and a GPT's blocks by heads, split "
     "over them (world = dp x tp)"},
    {"--sequence-parallel", NULL, DT_OPT_CONFIG_ON, "parallel.sequence_parallel",
     "with --tp: a GPT's blocks share the positions of their LayerNorms, dropouts and "
     "residual adds among the tp ranks (all-gathers and reduce-scatters in place of "
     "all-reduces; those activations divided by tp)"},
    {"--pp", "N", DT_OPT_CONFIG_KEY, "parallel.pp",
     "pipeline stages: the layers split into N stages (world = dp x tp x pp)"},
    {"--pp-schedule", "S", DT_OPT_CONFIG_KEY, "parallel.pp_schedule",
     "1f1b (a backward as soon as one is ready: at most pp micro-batches in flight on a contiguous "
     "split) or gpipe (all forwards first)"},
    {"--pp-split", "HOW", DT_OPT_CONFIG_KEY, "parallel.pp_split",
     "balanced (by counted arithmetic), round_robin (layer l on stage l mod pp), or the first "
     "layer of each later stage ('4,7')"},
    {"--micro-batches", "M", DT_OPT_CONFIG_KEY, "parallel.micro_batches",
     "micro-batches per optimizer step, each of --batch samples (same as --accumulation)"},
    {"--recompute", "HOW", DT_OPT_CONFIG_KEY, "train.recompute",
     "none, sqrt or every-K: keep one layer boundary every K layers and re-run the rest in "
     "backward; block: each transformer block re-runs its inside from its input (gradient "
     "checkpointing; same results, less activation memory)"},
    {"--explain-layout", NULL, DT_OPT_FLAG, "explain-layout",
     "print each rank's stage, which layers --tp splits, each rank's part and parameter "
     "bytes, each pipeline stage's order of forwards and backwards, and exit"},
    {"--accumulation", "K", DT_OPT_CONFIG_KEY, "parallel.accumulation",
     "micro-steps per optimizer step"},
    {"--zero", "0|1|3", DT_OPT_CONFIG_KEY, "parallel.zero",
     "ZeRO stage (1 shards optimizer state, 3 also parameters and gradients)"},
    {"--compress", "MODE", DT_OPT_CONFIG_KEY, "parallel.compress",
     "gradients on the wire: none, fp16, bf16, topk:RATIO or powersgd:RANK"},
    {"--compress-warmup", "N", DT_OPT_CONFIG_KEY, "parallel.compress_warmup",
     "the first N optimizer steps exchange uncompressed gradients, then --compress"},
    {"--clients", "C", DT_OPT_CONFIG_KEY, "fedavg.clients",
     "fedavg: simulated clients, each with its own partition of the training set"},
    {"--clients-per-round", "K", DT_OPT_CONFIG_KEY, "fedavg.clients_per_round",
     "fedavg: clients sampled per round"},
    {"--rounds", "R", DT_OPT_CONFIG_KEY, "fedavg.rounds",
     "fedavg: rounds of training (train.epochs is ignored under fedavg)"},
    {"--local-epochs", "E", DT_OPT_CONFIG_KEY, "fedavg.local_epochs",
     "fedavg: epochs of its partition each sampled client trains per round"},
    {"--local-steps", "N", DT_OPT_CONFIG_KEY, "fedavg.local_steps",
     "fedavg: local steps per client and round instead of --local-epochs"},
    {"--partition", "P", DT_OPT_CONFIG_KEY, "fedavg.partition",
     "fedavg: iid, shards:N or dirichlet:ALPHA"},
    {"--fedprox-mu", "MU", DT_OPT_CONFIG_KEY, "fedavg.fedprox_mu",
     "fedavg: FedProx's proximal weight (0: FedAvg)"},
    {"--servers", "K", DT_OPT_CONFIG_KEY, "parallel.servers",
     "ps: parameter-server ranks (the last K; the others are workers)"},
    {"--staleness", "S", DT_OPT_CONFIG_KEY, "parallel.staleness",
     "ps: steps a worker may run ahead of the slowest: 0 (bulk-synchronous), N, or inf"},
    {"--comm-algorithm", "A", DT_OPT_CONFIG_KEY, "comm.algorithm", "auto, mpi or ring"},
    {"--comm-timeout", "S", DT_OPT_CONFIG_KEY, "comm.timeout",
     "seconds before a stuck collective is reported"},
    {"--comm-check", NULL, DT_OPT_CONFIG_ON, "comm.check",
     "check that all ranks call the same collective with the same count"},
    {"--init-weights", "FILE", DT_OPT_STRING, "init-weights",
     "start from these weights (safetensors, PyTorch names and layouts)"},
    {"--save-weights", "FILE", DT_OPT_STRING, "save-weights",
     "write the final weights (safetensors, loadable by torch load_state_dict)"},
    {"--metrics", "FILE", DT_OPT_STRING, "metrics",
     "write one JSON object per epoch (and step, and evaluation with --eval-every)"},
    {"--windows-out", "FILE", DT_OPT_STRING, "windows-out",
     "data.kind text: write where every training window of the steps this run trains starts "
     "(a line per step: the step, then its global batch's offsets into the training bytes; "
     "numpy.loadtxt reads it), for a peer that trains on the same windows"},
    {"--trace", "FILE", DT_OPT_STRING, "trace",
     "write every rank's phases, collectives and steps as one Chrome trace (Perfetto, "
     "chrome://tracing)"},
    {"--trace-events", "N", DT_OPT_STRING, "trace-events",
     "events each rank keeps for --trace (default 262144, about 24 MB; more are dropped and "
     "counted; refused without --trace)"},
    {"--tensorboard", "DIR", DT_OPT_STRING, "tensorboard",
     "write the scalars (loss, accuracy, learning rate, samples/s, phase times, the run's "
     "figures as comm/NAME) as a TensorBoard event file in DIR"},
    {"--slow-rank", "R:MS", DT_OPT_STRING, "slow-rank",
     "rank R sleeps MS milliseconds before each step (a straggler, for demonstrations; also "
     "DTRAIN_SLOW_RANK)"},
    {"--jitter", "MS", DT_OPT_STRING, "jitter",
     "every rank that computes gradients (under ps, the workers) sleeps a random time of mean MS "
     "milliseconds before each step, exponentially distributed, from the seed, the rank and the "
     "step (stragglers that move from rank to rank, for demonstrations)"},
    {"--checkpoint-dir", "DIR", DT_OPT_CONFIG_KEY, "checkpoint.dir",
     "write checkpoints into DIR/step-N (DIR made and checked before the first step; "
     "docs/checkpoint-format.md): every --checkpoint-every "
     "steps and when training ends"},
    {"--checkpoint-every", "N", DT_OPT_CONFIG_KEY, "checkpoint.every",
     "optimizer steps between checkpoints (0: only when training ends; with --checkpoint-dir)"},
    {"--keep-checkpoints", "K", DT_OPT_CONFIG_KEY, "checkpoint.keep",
     "keep the newest K complete checkpoints (with --checkpoint-dir)"},
    {"--checkpoint-on-error", "stop|continue", DT_OPT_CONFIG_KEY, "checkpoint.on_error",
     "a checkpoint that cannot be written: stop (default) or warn and train on (with "
     "--checkpoint-dir)"},
    {"--resume", "PATH", DT_OPT_STRING, "resume",
     "go on from a checkpoint, or from the newest valid one in a directory (corrupt or "
     "incomplete ones are skipped with a warning; a directory without one: start from the "
     "beginning, saying what it holds; a PATH that does not exist is an error)"},
    {"--on-nonfinite", "skip|stop", DT_OPT_CONFIG_KEY, "train.on_nonfinite",
     "a NaN or Inf in a step's loss or gradients on any rank: every rank skips the step "
     "(default; fedavg drops the round's bad clients and averages the others), or the run "
     "stops naming rank, layer and step"},
    {"--stop-on", "SIGNAL", DT_OPT_CONFIG_KEY, "train.stop_signal",
     "usr1|usr2|term|int: on that signal every rank stops after the same step, writes the "
     "checkpoint that ends the run and exits with status 4 (under mpirun: usr1, which it "
     "passes on; a second signal ends the process; ps only at --staleness 0)"},
    {"--skip-limit", "N", DT_OPT_CONFIG_KEY, "train.skip_limit",
     "with --on-nonfinite skip: N steps skipped in a row end the run as stop would (0: no "
     "limit)"},
    {"--check-replicas", NULL, DT_OPT_FLAG, "check-replicas",
     "after training, compare every copy of each parameter bit for bit (data-parallel "
     "replicas, a tensor-parallel group's whole tensors, a tied table on two pipeline stages) "
     "and say so; a copy that differs fails the run naming the tensor and the ranks"},
    {"--progress", NULL, DT_OPT_FLAG, "progress",
     "draw a progress bar even when not on a terminal"},
    {"--no-progress", NULL, DT_OPT_FLAG, "no-progress", "plain log lines even on a terminal"},
};
#define N_TRAIN_OPTS ((int)(sizeof train_opts / sizeof train_opts[0]))

typedef struct run_ctx {
    const dt_config *cfg;
    int rank;
    int bar;       /* draw a progress bar */
    FILE *metrics; /* rank 0 only */
    int bar_open;  /* a progress bar line is on the terminal, unterminated */
    dt_tb *tb;     /* --tensorboard, rank 0 only */
    int64_t global_batch;
    dt_train_layout lay; /* the layout and what the strategy says of itself */
    int64_t attempted;   /* steps reported, taken or skipped: 0 in an evaluation-only run */
    int64_t noted;       /* steps taken with a note: fedavg's rounds that dropped clients */
} run_ctx;

/* 1 when the strategy cuts the run in rounds (fedavg): a step is a round. */
static int by_rounds(const dt_train_layout *lay)
{
    return strcmp(lay->epoch_word, "epoch") != 0;
}

static void write_json(FILE *f, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s != NULL) {
        fprintf(f, "%s\n", s);
        fflush(f);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/* A warning about step s on a line of its own (a progress bar's line closed first): the
 * round, or the epoch and step, then `what` and the message. */
static void warn_step(run_ctx *c, const dt_step_info *s, const char *what, const char *msg)
{
    if (c->bar_open)
        fputc('\n', stderr);
    c->bar_open = 0;
    if (by_rounds(&c->lay))
        fprintf(stderr, "dtrain: warning: %s %lld%s: %s\n", c->lay.epoch_word,
                (long long)s->epoch + 1, what, msg);
    else
        fprintf(stderr, "dtrain: warning: epoch %lld step %lld/%lld%s: %s\n",
                (long long)s->epoch + 1, (long long)s->epoch_step, (long long)s->epoch_steps, what,
                msg);
}

static dt_status on_step(void *vctx, const dt_step_info *s)
{
    run_ctx *c = vctx;
    c->attempted++;
    dt_cli_hooks_step(c->rank, s->step);
    if (c->rank != 0)
        return DT_OK;
    if (s->skipped) {
        warn_step(c, s, " skipped on every rank", dt_last_error());
        return DT_OK;
    }
    if (s->note != NULL) { /* a step taken without part of its work (fedavg's clients) */
        c->noted++;
        warn_step(c, s, "", s->note);
    }
    const int64_t every = c->cfg->train.log_every;
    if (c->bar) {
        const int width = 30;
        int filled = (int)(width * s->epoch_step / s->epoch_steps);
        double eta = s->samples_per_s > 0 ? (double)(s->epoch_steps - s->epoch_step) *
                                                (double)c->global_batch / s->samples_per_s
                                          : 0.0;
        fprintf(stderr, "\repoch %lld [%.*s%*s] %lld/%lld loss %.4f %.0f samples/s ETA %.0fs ",
                (long long)s->epoch + 1, filled, "##############################", width - filled,
                "", (long long)s->epoch_step, (long long)s->epoch_steps, s->loss, s->samples_per_s,
                eta);
        c->bar_open = s->epoch_step != s->epoch_steps;
        if (!c->bar_open)
            fputc('\n', stderr);
        fflush(stderr);
    } else if (every > 0 && s->step % every == 0) {
        char norm[48] = ""; /* with optim.clip_norm: the norm before clipping */
        if (isfinite(s->grad_norm))
            snprintf(norm, sizeof norm, " grad_norm %.4g", s->grad_norm);
        printf("epoch %lld step %lld/%lld loss %.6f lr %.3g%s %.0f samples/s\n",
               (long long)s->epoch + 1, (long long)s->epoch_step, (long long)s->epoch_steps,
               s->loss, s->lr, norm, s->samples_per_s);
        fflush(stdout);
    }
    if (c->tb != NULL &&
        (dt_tb_scalar(c->tb, "train/loss", s->step, s->loss) != DT_OK ||
         dt_tb_scalar(c->tb, "train/learning_rate", s->step, s->lr) != DT_OK ||
         dt_tb_scalar(c->tb, "train/samples_per_s", s->step, s->samples_per_s) != DT_OK))
        return DT_ERR_IO;
    if (c->metrics != NULL && every > 0 && s->step % every == 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "step");
        cJSON_AddNumberToObject(o, "epoch", (double)s->epoch + 1);
        cJSON_AddNumberToObject(o, "step", (double)s->step);
        cJSON_AddNumberToObject(o, "samples", (double)s->samples);
        cJSON_AddNumberToObject(o, "loss", s->loss);
        cJSON_AddNumberToObject(o, "lr", s->lr);
        if (isfinite(s->grad_norm))
            cJSON_AddNumberToObject(o, "grad_norm", s->grad_norm);
        write_json(c->metrics, o);
    }
    return DT_OK;
}

static dt_status on_epoch(void *vctx, const dt_epoch_info *e)
{
    run_ctx *c = vctx;
    /* A strategy that cuts the run in rounds (fedavg) counts a round's local samples. */
    const int rounds = by_rounds(&c->lay);
    if (c->rank != 0)
        return DT_OK;
    if (c->bar_open) { /* stopped mid-epoch (--max-steps): end the bar's line */
        fputc('\n', stderr);
        c->bar_open = 0;
    }
    /* --epochs 0 (or --max-steps 0) evaluates the loaded weights without training; an
     * epoch whose every step was skipped says so with its NaN loss. */
    const int eval_only = c->attempted == 0;
    if (eval_only)
        printf("no training steps (evaluation only):");
    else
        printf("%s %lld: train loss %.4f", c->lay.epoch_word, (long long)e->epoch + 1,
               e->train_loss);
    /* A text run's test set is the corpus's validation tail. */
    const char *test = c->cfg->data.kind == DT_DATA_TEXT ? "val" : "test";
    if (!isnan(e->test_loss))
        printf("  %s loss %.4f", test, e->test_loss);
    if (!isnan(e->test_accuracy))
        printf("  %s accuracy %.4f", test, e->test_accuracy);
    if (eval_only)
        printf("\n");
    else if (rounds) /* a round's samples: its clients' local epochs or steps, added up */
        printf("  %.0f local samples/s  (%.2f s)\n", e->samples_per_s, e->epoch_s);
    else if (c->cfg->data.kind == DT_DATA_TEXT) /* a window's every byte is predicted */
        printf("  %.0f tokens/s  (%.1f s)\n", e->samples_per_s * (double)c->cfg->block_size,
               e->epoch_s);
    else
        printf("  %.0f samples/s  (%.1f s)\n", e->samples_per_s, e->epoch_s);
    fflush(stdout);
    if (c->tb != NULL && e->steps > 0 &&
        (dt_tb_scalar(c->tb, "epoch/train_loss", e->steps, e->train_loss) != DT_OK ||
         dt_tb_scalar(c->tb, "epoch/samples_per_s", e->steps, e->samples_per_s) != DT_OK ||
         /* under train.eval_every, on_eval wrote the test scalars */
         (c->cfg->train.eval_every == 0 && !isnan(e->test_loss) &&
          dt_tb_scalar(c->tb, "test/loss", e->steps, e->test_loss) != DT_OK) ||
         (c->cfg->train.eval_every == 0 && !isnan(e->test_accuracy) &&
          dt_tb_scalar(c->tb, "test/accuracy", e->steps, e->test_accuracy) != DT_OK)))
        return DT_ERR_IO;
    if (c->metrics != NULL) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "epoch");
        cJSON_AddNumberToObject(o, "epoch", (double)e->epoch + 1);
        if (rounds) { /* the round's clients: dt_fed_sample, as the strategy draws them */
            const dt_config *cf = c->cfg;
            int sampled[64];
            cJSON_AddNumberToObject(o, "round", (double)e->epoch + 1);
            if (cf->fedavg.clients_per_round <= 64) {
                dt_fed_sample(cf->fedavg.clients, cf->fedavg.clients_per_round, cf->train.seed,
                              e->epoch, sampled);
                cJSON_AddItemToObject(o, "clients",
                                      cJSON_CreateIntArray(sampled, cf->fedavg.clients_per_round));
            }
        }
        cJSON_AddNumberToObject(o, "steps", (double)e->steps);
        cJSON_AddNumberToObject(o, "train_loss", e->train_loss);
        if (isnan(e->test_loss))
            cJSON_AddNullToObject(o, "test_loss");
        else
            cJSON_AddNumberToObject(o, "test_loss", e->test_loss);
        if (isnan(e->test_accuracy))
            cJSON_AddNullToObject(o, "test_accuracy");
        else
            cJSON_AddNumberToObject(o, "test_accuracy", e->test_accuracy);
        cJSON_AddNumberToObject(o, "samples_per_s", e->samples_per_s);
        if (c->cfg->data.kind == DT_DATA_TEXT)
            cJSON_AddNumberToObject(o, "tokens_per_s",
                                    e->samples_per_s * (double)c->cfg->block_size);
        cJSON_AddNumberToObject(o, "epoch_s", e->epoch_s);
        write_json(c->metrics, o);
    }
    return DT_OK;
}

/* train.eval_every: a line and a metrics record ("event": "eval") per evaluation. Text runs
 * say validation loss in nats and bits per byte, and tokens (bytes predicted) per second. */
static dt_status on_eval(void *vctx, const dt_eval_info *e)
{
    run_ctx *c = vctx;
    if (c->rank != 0)
        return DT_OK;
    if (c->bar_open) {
        fputc('\n', stderr);
        c->bar_open = 0;
    }
    const int text = c->cfg->data.kind == DT_DATA_TEXT;
    const double per_s = e->samples_per_s * (text ? (double)c->cfg->block_size : 1.0);
    printf("step %lld: train loss %.4f", (long long)e->step, e->train_loss);
    if (text)
        printf("  val loss %.4f (%.4f bits/byte)", e->test_loss, e->test_loss / log(2.0));
    else
        printf("  test loss %.4f", e->test_loss);
    if (!isnan(e->test_accuracy))
        printf("  %s accuracy %.4f", text ? "val" : "test", e->test_accuracy);
    printf("  %.0f %s/s\n", per_s, text ? "tokens" : "samples");
    fflush(stdout);
    if (c->tb != NULL && (dt_tb_scalar(c->tb, "test/loss", e->step, e->test_loss) != DT_OK ||
                          (!isnan(e->test_accuracy) && dt_tb_scalar(c->tb, "test/accuracy", e->step,
                                                                    e->test_accuracy) != DT_OK)))
        return DT_ERR_IO;
    if (c->metrics != NULL) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", "eval");
        cJSON_AddNumberToObject(o, "epoch", (double)e->epoch + 1);
        cJSON_AddNumberToObject(o, "step", (double)e->step);
        if (isnan(e->train_loss)) /* every step since the last was skipped */
            cJSON_AddNullToObject(o, "train_loss");
        else
            cJSON_AddNumberToObject(o, "train_loss", e->train_loss);
        cJSON_AddNumberToObject(o, "test_loss", e->test_loss);
        if (text)
            cJSON_AddNumberToObject(o, "bits_per_byte", e->test_loss / log(2.0));
        if (isnan(e->test_accuracy))
            cJSON_AddNullToObject(o, "test_accuracy");
        else
            cJSON_AddNumberToObject(o, "test_accuracy", e->test_accuracy);
        cJSON_AddNumberToObject(o, text ? "tokens_per_s" : "samples_per_s", per_s);
        cJSON_AddNumberToObject(o, "train_s", e->train_s);
        write_json(c->metrics, o);
    }
    return DT_OK;
}

static dt_status on_checkpoint(void *vctx, const dt_ckpt_info *i)
{
    run_ctx *c = vctx;
    if (c->rank != 0)
        return DT_OK;
    if (c->bar_open)
        fputc('\n', stderr);
    c->bar_open = 0;
    if (i->status == DT_OK)
        printf("dtrain: checkpoint of step %lld written to %s (%.2f MB, %.3f s)\n",
               (long long)i->step, i->dir, (double)i->bytes / 1e6, i->seconds);
    else
        fprintf(stderr, "dtrain: warning: checkpoint of step %lld failed: %s\n", (long long)i->step,
                i->message);
    fflush(stdout);
    return DT_OK;
}

/* --slow-rank R:MS (or DTRAIN_SLOW_RANK), --jitter MS and --trace: what this rank records. */
static dt_status setup_observe(dt_trainer *t, const dt_cli_values *vals, const dt_config *cfg,
                               const dt_cli_world *world)
{
    const int rank = world->rank;
    const char *jitter = dt_cli_string(vals, "jitter");
    if (jitter != NULL) {
        double ms = 0;
        if (!dt_cli_real(jitter, 0, 1e6, &ms))
            return dt_fail(DT_ERR_INVALID, "--jitter: '%s' is not a number of milliseconds",
                           jitter);
        dt_train_layout lay;
        dt_trainer_layout(t, &lay);
        if (strcmp(lay.role, "server") != 0) /* a server only applies what workers send */
            dt_trainer_set_jitter(t, ms / 1e3);
    }
    const char *slow = dt_cli_string(vals, "slow-rank");
    if (slow == NULL)
        slow = getenv("DTRAIN_SLOW_RANK");
    if (slow != NULL) {
        char who_text[24] = "";
        const char *colon = strchr(slow, ':');
        const size_t n = colon != NULL ? (size_t)(colon - slow) : 0;
        long long who = -1;
        double ms = -1;
        if (n > 0 && n < sizeof who_text)
            memcpy(who_text, slow, n);
        if (n == 0 || n >= sizeof who_text || !dt_cli_whole(who_text, 0, INT32_MAX, &who) ||
            !dt_cli_real(colon + 1, 0, 1e6, &ms))
            return dt_fail(DT_ERR_INVALID,
                           "--slow-rank: '%s' is not RANK:MILLISECONDS (0 to 1e6 ms)", slow);
        if (who >= world->size)
            return dt_fail(DT_ERR_INVALID, "--slow-rank: rank %lld is not in this job of %d rank%s",
                           who, world->size, world->size == 1 ? "" : "s");
        if (who == rank)
            dt_trainer_set_delay(t, ms / 1e3);
    }
    if (dt_cli_string(vals, "trace") == NULL)
        return DT_OK;
    const char *n = dt_cli_string(vals, "trace-events");
    long long events = 262144;
    if (n != NULL && !dt_cli_whole(n, 1, 1LL << 32, &events))
        return dt_fail(DT_ERR_INVALID, "--trace-events: '%s' is not a count from 1 to 2^32", n);
    return dt_trainer_enable_trace(t, (size_t)events);
}

/* After the run: every rank's events into one trace file (collective; rank 0 writes). */
static dt_status write_trace(dt_trainer *t, const char *path, int rank)
{
    const double t0 = dt_now();
    dt_status st = dt_trainer_write_trace(t, path);
    if (st == DT_OK && rank == 0) {
        printf("dtrain: trace of every rank written to %s in %.2f s (open it in Perfetto or "
               "chrome://tracing)\n",
               path, dt_now() - t0);
        fflush(stdout);
    }
    return st;
}

static void print_train_help(void)
{
    dt_cli_print_help(stdout, "dtrain train [CONFIG] [options]",
                      "Trains the model that CONFIG describes (default: the seeds' ConvNet on\n"
                      "Fashion-MNIST). Under mpirun or srun every rank runs this command:\n"
                      "the ranks are laid out as dp x tp x pp (--dp, --tp, --pp), data-parallel\n"
                      "by default; only rank 0 prints and writes files.\n"
                      "Pixels are scaled as (x/255 - data.mean) / data.std. An option or key\n"
                      "set explicitly that has no effect in the run's setup (--staleness\n"
                      "under ddp, --checkpoint-every without --checkpoint-dir, ...) is\n"
                      "refused naming it; defaults are never judged (docs/USER_GUIDE.md).",
                      train_opts, N_TRAIN_OPTS, 1);
}

/* Test-only: DTRAIN_TEST_STALL="RANK:SECONDS" makes that rank sleep where the job starts,
 * as a rank stopped while it loads its data (tests/dp/cli_dp.sh: the others must report it
 * within --comm-timeout instead of hanging). */
static void test_stall(int rank)
{
    const char *v = getenv("DTRAIN_TEST_STALL");
    int who = -1;
    double secs = 0;
    if (v == NULL || sscanf(v, "%d:%lf", &who, &secs) != 2 || who != rank || secs <= 0)
        return;
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The path checked at start-up could not be written at the end after all (a full disk, a
 * directory removed meanwhile): the trained weights go to a file of their own in the
 * working directory, or else in TMPDIR, and the message says where. Keeps the original
 * error as the one the caller reports. Collective, as the save: every rank tries each path
 * with rank 0 (whose process id names the file, and whose outcome every rank hears). */
static void save_fallback(dt_trainer *t, const dt_cli_world *world, const dt_config *cfg)
{
    char why[1024], path[4096];
    snprintf(why, sizeof why, "%s", dt_last_error());
    int64_t pid = (int64_t)getpid();
    if (world->comm != NULL && dt_comm_bcast(world->comm, &pid, 1, DT_COMM_INT64, 0) != DT_OK) {
        dt_fail(DT_ERR_IO, "%s; no fallback file was tried (%s)", why, dt_last_error());
        return;
    }
    const char *tmpdir = getenv("TMPDIR");
    const char *dirs[2] = {".", tmpdir != NULL && tmpdir[0] ? tmpdir : "/tmp"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/dtrain-weights-%lld.safetensors", dirs[i], (long long)pid);
        if (dt_trainer_save_weights(t, path, cfg->data.mean, cfg->data.std) == DT_OK) {
            dt_fail(DT_ERR_IO, "%s; the trained weights are in %s instead", why, path);
            return;
        }
    }
    dt_fail(DT_ERR_IO, "%s; no fallback file could be written either (%s)", why, dt_last_error());
}

/* Every output is checked before the data loads, so that a run is never lost to a path
 * found unwritable at its end: the weights' directory takes a probe file, the metrics file
 * is opened (rank 0 writes both), for appending when the run resumes. */
static dt_status open_outputs(int rank, const char *save, const char *trace, const char *mpath,
                              int append, FILE **metrics)
{
    *metrics = NULL;
    if (rank != 0)
        return DT_OK;
    if (save != NULL && dt_check_writable(save, "save-weights") != DT_OK)
        return DT_ERR_IO;
    if (trace != NULL && dt_check_writable(trace, "trace") != DT_OK)
        return DT_ERR_IO;
    if (mpath != NULL && mpath[0] == '\0')
        return dt_fail(DT_ERR_IO, "metrics: the output path is empty");
    if (mpath != NULL && (*metrics = fopen(mpath, append ? "a" : "w")) == NULL)
        return dt_fail(DT_ERR_IO, "metrics: %s: cannot be opened for writing: %s", mpath,
                       strerror(errno));
    return DT_OK;
}

/* The first line: what trains, on how many ranks, samples, parameters, steps, threads;
 * under a pipeline, a second: the stages and the schedule. */
static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* fedavg: how non-IID the partition is, in one line (rank 0), and each client's class
 * histogram in the metrics file ("event": "partition"). */
static dt_status report_partition(const dt_config *cfg, dt_trainer *t, FILE *metrics)
{
    const int64_t *client_of = NULL;
    int64_t mv = 0;
    dt_trainer_fed_partition(t, &client_of, &mv);
    if (client_of == NULL) /* the strategy keeps none */
        return DT_OK;
    const dt_dataset *tr = dt_trainer_train_set(t);
    const int C = cfg->fedavg.clients;
    const int64_t K = tr->targets == DT_TARGETS_LABELS ? tr->num_classes : 1;
    int64_t *hist = NULL, *sizes = NULL;
    dt_status st = dt_alloc((size_t)C * (size_t)K * sizeof(int64_t), "histogram", (void **)&hist);
    if (st == DT_OK)
        st = dt_alloc((size_t)C * sizeof(int64_t), "client sizes", (void **)&sizes);
    if (st != DT_OK || client_of == NULL)
        goto done;
    if (K > 1)
        dt_fed_histogram(client_of, tr->labels, tr->n, K, C, hist);
    else
        for (int64_t i = 0; i < tr->n; i++)
            hist[client_of[i]]++;
    double classes = 0;
    for (int c = 0; c < C; c++) {
        sizes[c] = 0;
        for (int64_t k = 0; k < K; k++) {
            sizes[c] += hist[(size_t)c * (size_t)K + (size_t)k];
            classes += hist[(size_t)c * (size_t)K + (size_t)k] > 0;
        }
    }
    char part[64];
    dt_fed_partition_format(&cfg->fedavg.partition, part, sizeof part);
    if (metrics != NULL) {
        cJSON *o = cJSON_CreateObject(), *h = cJSON_AddArrayToObject(o, "histogram");
        cJSON_AddStringToObject(o, "event", "partition");
        cJSON_AddStringToObject(o, "partition", part);
        cJSON_AddNumberToObject(o, "clients", C);
        cJSON_AddNumberToObject(o, "moved", (double)mv);
        for (int c = 0; c < C; c++) {
            cJSON *row = cJSON_CreateArray();
            for (int64_t k = 0; k < K; k++)
                cJSON_AddItemToArray(row, cJSON_CreateNumber((double)hist[(size_t)c * K + k]));
            cJSON_AddItemToArray(h, row);
        }
        write_json(metrics, o);
    }
    qsort(sizes, (size_t)C, sizeof *sizes, cmp_i64);
    printf("dtrain: fedavg partition %s over %d clients: %lld/%lld/%lld samples per client "
           "(min/median/max), %.1f of %lld classes per client on average%s",
           part, C, (long long)sizes[0], (long long)sizes[C / 2], (long long)sizes[C - 1],
           classes / C, (long long)K, mv > 0 ? "" : "\n");
    if (mv > 0)
        printf("; %lld samples moved to give every client one\n", (long long)mv);
done:
    dt_free(hist);
    dt_free(sizes);
    return st;
}

static dt_status print_header(const dt_config *cfg, const dt_cli_world *world, dt_trainer *t,
                              int threads)
{
    const dt_dataset *tr = dt_trainer_train_set(t), *te = dt_trainer_test_set(t);
    char blas[128];
    dt_cli_blas_describe(blas, sizeof blas);
    const dt_model *m = dt_trainer_model(t), *whole = NULL;
    dt_status st = dt_trainer_whole_model(t, &whole);
    if (st != DT_OK)
        return st;
    dt_train_layout lay;
    dt_trainer_layout(t, &lay);
    char layout[sizeof lay.summary] = "", params[96] = "";
    if (lay.tp > 1 || lay.pp > 1) {
        if (lay.pp > 1)
            snprintf(layout, sizeof layout, " (dp %d x tp %d x pp %d)", lay.dp, lay.tp, lay.pp);
        else
            snprintf(layout, sizeof layout, " (dp %d x tp %d)", lay.dp, lay.tp);
        snprintf(params, sizeof params, " (%zu on rank 0)", dt_model_param_count(m));
    }
    if (lay.summary[0] != '\0')
        snprintf(layout, sizeof layout, "%s", lay.summary);
    char steps[96];
    if (by_rounds(&lay))
        snprintf(steps, sizeof steps, "local batches of %lld",
                 (long long)dt_trainer_global_batch(t));
    else
        snprintf(steps, sizeof steps, "%lld steps per epoch of %lld samples",
                 (long long)dt_trainer_steps_per_epoch(t), (long long)dt_trainer_global_batch(t));
    char samples[320];
    const dt_text_windows *w = dt_trainer_text_windows(t);
    if (w != NULL) {
        snprintf(steps, sizeof steps, "%lld steps of %lld windows", (long long)cfg->train.max_steps,
                 (long long)dt_trainer_global_batch(t));
        if (cfg->train.eval)
            snprintf(samples, sizeof samples,
                     "text of %lld training and %lld validation bytes (%lld validation windows "
                     "of %lld)",
                     (long long)w->n_train, (long long)w->n_val, (long long)te->n,
                     (long long)w->block_size);
        else /* no validation windows are cut: nothing evaluates them */
            snprintf(samples, sizeof samples,
                     "text of %lld training and %lld validation bytes (not evaluated: train.eval "
                     "off)",
                     (long long)w->n_train, (long long)w->n_val);
    } else {
        snprintf(samples, sizeof samples, "%lld training and %lld test samples", (long long)tr->n,
                 (long long)te->n);
    }
    printf("dtrain: %s%s%d rank%s%s, %s, %zu parameters%s, "
           "%s, %d thread%s per rank%s%s\n",
           cfg->source[0] ? cfg->source : "built-in ConvNet", ", ", world->size,
           world->size == 1 ? "" : "s", layout, samples, dt_model_whole_param_count(whole), params,
           steps, threads, threads == 1 ? "" : "s", blas[0] ? ", " : "", blas);
    if (lay.pp > 1) {
        const int mb = dt_config_micro_batches(cfg);
        char layers[160];
        if (lay.stage_runs > 1)
            snprintf(layers, sizeof layers, "every %d%s layer from %d to %d, each on its own",
                     lay.pp, lay.pp == 2 ? "nd" : (lay.pp == 3 ? "rd" : "th"), lay.stage_first,
                     lay.stage_last - 1);
        else
            snprintf(layers, sizeof layers, "layers %d..%d", lay.stage_first, lay.stage_last - 1);
        printf("dtrain: pipeline of %d stages (%s), rank 0's stage runs %s; %s schedule, %d "
               "micro-batch%s per step%s\n",
               lay.pp,
               cfg->parallel.n_pp_split > 0 ? "split points from the config"
               : cfg->parallel.pp_placement == DT_STAGES_ROUND_ROBIN
                   ? "round-robin: layer l on stage l mod pp"
                   : "balanced by counted arithmetic",
               layers, dt_pp_schedule_name(cfg->parallel.pp_schedule), mb, mb == 1 ? "" : "es",
               mb == 1 ? " (naive model parallelism: one stage busy at a time; "
                         "--micro-batches fills the pipeline)"
                       : "");
    }
    dt_model_memory mem;
    dt_model_memory_info(m, &mem);
    if (mem.segments > 0)
        printf("dtrain: recompute: %d segment%s of %d layers on rank 0%s; activations kept from "
               "forward to backward %.2f MB (input %.2f MB, saved masks and indices %.2f MB), "
               "%.2f MB refilled in backward\n",
               mem.segments, mem.segments == 1 ? "" : "s", mem.segment_layers,
               lay.pp > 1 ? "'s stage" : "", (double)(mem.kept_bytes + mem.state_bytes) / 1e6,
               (double)mem.input_bytes / 1e6, (double)mem.state_bytes / 1e6,
               (double)mem.working_bytes / 1e6);
    dt_cli_print_gpt_memory(cfg, t);
    if (cfg->parallel.compress.kind != DT_COMPRESS_NONE && lay.dp == 1 &&
        strcmp(lay.role, "clients") != 0) /* fedavg compresses each client's update */
        printf("dtrain: warning: --compress compresses what data-parallel ranks exchange; with "
               "one replica there is no exchange and it changes nothing\n");
    if (lay.tp > 1 && lay.pp == 1 && dt_model_param_count(m) == dt_model_whole_param_count(m))
        printf("dtrain: warning: --tp %d splits no layer (each has fewer weights than "
               "parallel.tp_min_weights = %lld, or fewer outputs than ranks): every "
               "tensor-parallel rank computes the whole model (--explain-layout shows why)\n",
               lay.tp, (long long)cfg->parallel.tp_min_weights);
    fflush(stdout);
    return DT_OK;
}

/* --windows-out: the offsets of the windows of every step this run will train, from the
 * step it starts at (a resumed run's checkpoint step) to train.max_steps, each step's whole
 * global batch (text.h's o(s, j), dt_text_write_offsets), written before training so that a
 * peer (bench/torch_gpt.py) can train on the same windows. Rank 0 only. */
static dt_status write_windows(const dt_trainer *t, const dt_config *cfg, const char *path)
{
    const dt_text_windows *w = dt_trainer_text_windows(t);
    if (w == NULL) /* refused earlier (check_cli_options); a strategy without windows */
        return dt_fail(DT_ERR_INVALID, "--windows-out: this run draws no text windows");
    const int64_t first = dt_trainer_optim_steps(t); /* steps before: a resume's position */
    const int64_t steps = cfg->train.max_steps > first ? cfg->train.max_steps - first : 0;
    const dt_status st = dt_text_write_offsets(w, first, steps, dt_trainer_global_batch(t), path);
    if (st != DT_OK)
        return st;
    printf("dtrain: training windows of steps %lld..%lld (%lld per step) written to %s\n",
           (long long)first, (long long)(first + steps - 1), (long long)dt_trainer_global_batch(t),
           path);
    return DT_OK;
}

/* --check-replicas: the verdict, and on rank 0 a line saying which copies were compared. */
static dt_status check_replicas(dt_trainer *t, int rank)
{
    dt_replica_check rc;
    const dt_status st = dt_trainer_check_replicas(t, &rc);
    if (st != DT_OK || rank != 0)
        return st;
    char what[512] = "";
    size_t used = 0;
    if (rc.dp > 1)
        used += (size_t)snprintf(what + used, sizeof what - used,
                                 "each of the %lld tensors on its %d data-parallel replicas",
                                 (long long)rc.tensors, rc.dp);
    if (rc.tp > 1 && used < sizeof what)
        used += (size_t)snprintf(what + used, sizeof what - used,
                                 "%s%lld whole tensors on each of the %d tensor-parallel ranks",
                                 used > 0 ? "; " : "", (long long)rc.tp_whole, rc.tp);
    char stages[256] = "";
    for (int s = 0, n = 0, k = 0; s < 64 && k < (int)sizeof stages; s++)
        if (rc.tied >> s & 1)
            k += snprintf(stages + k, sizeof stages - (size_t)k, "%s%d", n++ > 0 ? " and " : "", s);
    if (stages[0] != '\0' && used < sizeof what)
        used += (size_t)snprintf(what + used, sizeof what - used, "%sthe tied table on stages %s",
                                 used > 0 ? "; " : "", stages);
    if (used == 0)
        printf("dtrain: replicas: no parameter has a second copy in this layout: nothing to "
               "compare\n");
    else
        printf("dtrain: replicas: every copy bitwise equal: %s\n", what);
    return DT_OK;
}

/* The command line's own options that would change nothing (dt_config_check judges the
 * config's keys): refused as a usage error, before any rank starts MPI. */
static int check_cli_options(const dt_cli_values *vals, const dt_config *cfg)
{
    if (dt_cli_string(vals, "windows-out") != NULL && cfg->data.kind != DT_DATA_TEXT) {
        fprintf(stderr, "dtrain: --windows-out writes the training windows of data.kind text; "
                        "this run's data is not text\n");
        return DT_EXIT_USAGE;
    }
    if (dt_cli_string(vals, "trace-events") != NULL && dt_cli_string(vals, "trace") == NULL) {
        fprintf(stderr, "dtrain: --trace-events has no effect without --trace: it sizes the "
                        "trace's buffers\n");
        return DT_EXIT_USAGE;
    }
    if (dt_cli_flag(vals, "check-replicas") && !dt_strategy_equal_copies(cfg->parallel.strategy)) {
        fprintf(stderr,
                "dtrain: --check-replicas has no effect under --strategy %s: its copies of a "
                "parameter differ by design (it applies to ddp's layouts)\n",
                dt_strategy_name(cfg->parallel.strategy));
        return DT_EXIT_USAGE;
    }
    if (dt_cli_flag(vals, "check-replicas") && cfg->parallel.zero == 3) {
        fprintf(stderr, "dtrain: --check-replicas has no effect with --zero 3: every parameter "
                        "is held once, in one rank's slice, so there are no copies to compare\n");
        return DT_EXIT_USAGE;
    }
    if (dt_cli_flag(vals, "progress") && dt_cli_flag(vals, "no-progress")) {
        fprintf(stderr, "dtrain: --no-progress has no effect with --progress: give one\n");
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

int dt_cmd_train(int argc, char **argv)
{
    dt_config cfg = dt_config_default();
    dt_cli_values vals;
    int rc = dt_cli_parse("train", train_opts, N_TRAIN_OPTS, argc, argv, &cfg, &vals, 1);
    if (rc == -1) {
        print_train_help();
        return DT_EXIT_OK;
    }
    if (rc != DT_EXIT_OK)
        return dt_cli_refuse_before_mpi(rc, &argc, &argv);
    if (dt_config_check(&cfg) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return dt_cli_refuse_before_mpi(DT_EXIT_USAGE, &argc, &argv);
    }
    if ((rc = check_cli_options(&vals, &cfg)) != DT_EXIT_OK)
        return dt_cli_refuse_before_mpi(rc, &argc, &argv);
    if (dt_cli_flag(&vals, "explain-layout"))
        return dt_cli_explain_layout(&cfg);
    dt_cli_stop_install(&cfg);
    dt_cli_world world;
    rc = dt_cli_world_open(&world, &argc, &argv, &cfg);
    if (rc != DT_EXIT_OK)
        return rc;
    /* The trainer runs the model on this many threads (OpenBLAS itself on one). */
    const int threads = cfg.train.threads > 0 ? cfg.train.threads : dt_cli_default_threads();
    cfg.train.threads = threads;

    dt_trainer *t = NULL;
    FILE *metrics = NULL;
    dt_tb *tb = NULL;
    int code = DT_EXIT_FAIL;
    const char *init = dt_cli_string(&vals, "init-weights");
    const char *save = dt_cli_string(&vals, "save-weights");
    /* A resumed run (dtrain launch's restarts among them) adds to the metrics it began. */
    if (open_outputs(world.rank, save, dt_cli_string(&vals, "trace"),
                     dt_cli_string(&vals, "metrics"), dt_cli_string(&vals, "resume") != NULL,
                     &metrics) != DT_OK)
        goto fail;
    const char *tbdir = dt_cli_string(&vals, "tensorboard");
    if (world.rank == 0 && tbdir != NULL && dt_tb_open(tbdir, &tb) != DT_OK)
        goto fail;
    test_stall(world.rank);
    if (dt_trainer_create(&cfg, world.comm, &t) != DT_OK)
        goto fail;
    if (init != NULL && dt_trainer_load_weights(t, init) != DT_OK)
        goto fail;
    const char *from = dt_cli_string(&vals, "resume");
    if (from != NULL && dt_cli_resume(t, from, world.rank) != DT_OK)
        goto fail;
    const char *windows = dt_cli_string(&vals, "windows-out");
    if (world.rank == 0 && windows != NULL && write_windows(t, &cfg, windows) != DT_OK)
        goto fail;
    dt_cli_hooks_setup(t, world.rank);
    const dt_status observe = setup_observe(t, &vals, &cfg, &world);
    if (observe != DT_OK) {
        code = observe == DT_ERR_INVALID ? DT_EXIT_USAGE : DT_EXIT_FAIL; /* a bad value */
        goto fail;
    }
    int tty = isatty(STDERR_FILENO) && !dt_cli_launched();
    run_ctx ctx = {.cfg = &cfg,
                   .rank = world.rank,
                   .metrics = metrics,
                   .tb = tb,
                   .global_batch = dt_trainer_global_batch(t),
                   .bar = dt_cli_flag(&vals, "progress") ||
                          (tty && !dt_cli_flag(&vals, "no-progress"))};
    if ((world.rank == 0 && print_header(&cfg, &world, t, threads) != DT_OK) ||
        dt_cli_print_rank_memory(&cfg, &world, t) != DT_OK)
        goto fail;
    dt_trainer_layout(t, &ctx.lay);
    if (world.rank == 0 && ctx.lay.length_key != NULL) {
        /* Said, not refused: every config file names its epochs, and fedavg runs from the
         * same files (docs/FEDAVG.md). */
        if (dt_config_given(&cfg, "train.epochs") != NULL)
            printf("dtrain: %s: %s is ignored: %s sets the length of training\n",
                   dt_strategy_name(cfg.parallel.strategy), dt_config_given(&cfg, "train.epochs"),
                   ctx.lay.length_key);
    }
    /* Where the strategy deals the training set to clients (fedavg), how. */
    if (world.rank == 0 && report_partition(&cfg, t, metrics) != DT_OK)
        goto fail;
    dt_train_callbacks cb = {.ctx = &ctx,
                             .on_step = on_step,
                             .on_epoch = on_epoch,
                             .on_checkpoint = on_checkpoint,
                             .on_eval = on_eval};
    const char *trace = dt_cli_string(&vals, "trace");
    /* The phases and the trace before the figures, whose all-reduces timed alone are not
     * part of the run. */
    const dt_status ran = dt_trainer_run(t, &cb);
    if (ran == DT_ERR_NONFINITE)
        code = DT_EXIT_NONFINITE;
    if (ran != DT_OK || dt_cli_report_phases(t, world.rank, metrics, tb) != DT_OK ||
        (trace != NULL && write_trace(t, trace, world.rank) != DT_OK) ||
        dt_cli_report_figures(t, &world, &cfg, metrics, tb) != DT_OK ||
        (dt_cli_flag(&vals, "check-replicas") && check_replicas(t, world.rank) != DT_OK))
        goto fail;
    if (world.rank == 0 && dt_trainer_skipped_steps(t) > 0)
        printf("dtrain: %lld step%s skipped for a NaN or Inf (train.on_nonfinite skip)\n",
               (long long)dt_trainer_skipped_steps(t), dt_trainer_skipped_steps(t) == 1 ? "" : "s");
    int done = DT_EXIT_OK;
    if (dt_trainer_stopped_at(t) >= 0) {
        done = DT_EXIT_STOPPED;
        if (world.rank == 0) {
            const char *dir = cfg.checkpoint.dir[0] != '\0' ? cfg.checkpoint.dir : NULL;
            /* On stderr: dtrain launch reads it there (MPICH's mpiexec may exit 0). */
            fprintf(stderr, "dtrain: stopped on %s after %s %lld (train.stop_signal): %s%s%s\n",
                    dt_cli_stop_signal_name(&cfg), by_rounds(&ctx.lay) ? "round" : "step",
                    (long long)dt_trainer_stopped_at(t),
                    dir != NULL ? "--resume " : "no checkpoint.dir, so nothing to resume from",
                    dir != NULL ? dir : "", dir != NULL ? " goes on from its checkpoint" : "");
            /* For a job script: whether the run ended or stopped, and where it stands. */
            cJSON *o = metrics != NULL ? cJSON_CreateObject() : NULL;
            if (o != NULL) {
                cJSON_AddStringToObject(o, "event", "stopped");
                cJSON_AddNumberToObject(o, "step", (double)dt_trainer_stopped_at(t));
                cJSON_AddStringToObject(o, "signal", dt_cli_stop_signal_name(&cfg));
                if (dir != NULL)
                    cJSON_AddStringToObject(o, "checkpoint_dir", dir);
                else
                    cJSON_AddNullToObject(o, "checkpoint_dir");
                write_json(metrics, o);
            }
        }
    }
    if (world.rank == 0 && ctx.noted > 0) /* fedavg: the rounds that dropped clients */
        printf("dtrain: %lld %s%s dropped clients for a NaN or Inf and averaged the others "
               "(train.on_nonfinite skip)\n",
               (long long)ctx.noted, ctx.lay.epoch_word, ctx.noted == 1 ? "" : "s");
    /* Whole tensors whatever the layout, one at a time: every rank takes part in passing
     * its stage's tensors (gathered over its tensor-parallel group) to rank 0, which
     * writes them. */
    if (save != NULL) {
        if (dt_trainer_save_weights(t, save, cfg.data.mean, cfg.data.std) != DT_OK) {
            save_fallback(t, &world, &cfg);
            goto fail;
        }
        if (world.rank == 0)
            printf("dtrain: weights written to %s\n", save);
    }
    if (metrics != NULL)
        fclose(metrics);
    if (tb != NULL)
        printf("dtrain: TensorBoard scalars written to %s\n", dt_tb_path(tb));
    dt_tb_close(tb);
    dt_cli_hooks_close();
    dt_trainer_free(t);
    /* Under mpirun a rank's non-zero status (4: stopped) ends the others once they are past
     * MPI_Finalize: what they printed must be out before. */
    fflush(stdout);
    fflush(stderr);
    dt_cli_world_close(&world);
    return done;
fail:
    if (world.size > 1)
        fprintf(stderr, "dtrain: rank %d: %s\n", world.rank, dt_last_error());
    else
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
    if (metrics != NULL)
        fclose(metrics);
    dt_tb_close(tb);
    if (t != NULL && world.size > 1 && dt_trainer_ended_by_peer(t)) {
        /* The rank that left ends the job, with its own exit status (3 for a NaN stop,
         * which dtrain launch does not restart): this one's abort waits for it. */
        const struct timespec defer = {2, 0};
        nanosleep(&defer, NULL);
    }
    /* On several ranks the job is aborted next, and the trainer's buffers may still be in
     * flight (a ps push that a server is reading from this process under MPICH's UCX): they
     * stay allocated until the abort ends the process. */
    dt_cli_hooks_close();
    if (world.size <= 1)
        dt_trainer_free(t);
    return dt_cli_world_fail(&world, code);
}
