/* fedavg.c — federated averaging (McMahan et al., "Communication-efficient learning of deep
 * networks from decentralized data", AISTATS 2017) over simulated clients, behind the
 * strategy interface. docs/FEDAVG.md maps the algorithm to this file.
 *
 * One trainer step is one round t:
 *   1. the round's K clients S_t are drawn from (seed, t) (dt_fed_sample: every rank draws
 *      the same without a message) and laid out in slots 0..K-1, ascending;
 *   2. each rank simulates its contiguous share of the slots, one client after another:
 *      from the round's global model w_t, client c trains E local epochs of its partition P_c
 *      (or a number of local steps) with the trainer's optimizer, its state reset for each
 *      client, at the round's learning rate; FedProx adds mu (w - w_t) to each gradient
 *      (Li et al., MLSys 2020);
 *   3. slot j holds the client's update w_c - w_t, compressed as parallel.compress says
 *      (none; fp16 or bf16; topk:R, its ceil(R n) largest entries as (index, value) pairs:
 *      clients keep no state between rounds, so no error feedback); the slots are
 *      all-gathered, and every rank decodes them, weighs each by its client's sample count
 *      and sums them in slot order:
 *          w_{t+1} = w_t + (sum_j n_{c_j} D(w_{c_j} - w_t)) / (sum_j n_{c_j})
 *      so the parameters do not depend on how the clients were spread over ranks (1, 2 or
 *      3 ranks give the same bits: tests/fed).
 * With optim.clip_norm, each local step clips the client's gradient by its own norm.
 * A client's local order and dropout masks are keyed by (round, client, local epoch), never
 * by the rank, for the same reason. Only the updates cross the network.
 * The non-finite guard: a client whose local loss or update holds a NaN or Inf marks its
 * slot in the round's small all-reduce (with the loss), so every rank learns in the same
 * round which clients failed. Under train.on_nonfinite skip the round drops them and
 * averages the others (the sums above over the clients left; the step's note names the
 * dropped); when every client failed, or under stop, the round keeps w_t and returns
 * DT_ERR_NONFINITE, and the trainer skips it or stops, as for a step of the other
 * strategies. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "dtrain/fed.h"
#include "dtrain/optim.h"
#include "dtrain/rng.h"
#include "optim/optim_team.h"
#include "parallel/compress.h"
#include "parallel/registry.h"
#include "parallel/strategy_impl.h"
#include "tensor/scan.h"

typedef struct dt_fedavg {
    dt_strategy base;
    dt_comm *comm; /* a duplicate of the world */
    int rank, size;
    int64_t *start;          /* [clients + 1]: client c's samples idx[start[c] .. start[c+1]) */
    int64_t *idx;            /* [training samples], by client, ascending within one */
    int64_t *order, *batch;  /* [largest client], [planned batch] */
    int *sampled;            /* [clients_per_round] */
    int64_t *client_of;      /* [training samples]: each sample's client */
    int64_t *sizes;          /* [clients]: samples per client */
    int64_t moved;           /* samples moved to give every client one (dt_fed_assign) */
    int64_t local_batch;     /* train.batch: a client's local batch */
    float *global;           /* [parameters]: the round's global model */
    float *slots;            /* [clients_per_round x parameters]: updates, then weighted */
    double *sums;            /* [2 + clients_per_round]: loss sum, samples, slots not finite */
    size_t *counts, *displs; /* [size]: each rank's slots on the wire, in elements */
    size_t n;                /* parameters */
    /* parallel.compress: the wire's slots (slot_bytes each) and their encoding's buffers */
    dt_compress_kind ckind;
    size_t k, slot_bytes;          /* topk's entries per slot; a slot's bytes on the wire */
    uint8_t *wire;                 /* [clients_per_round x slot_bytes] */
    float *delta, *tk_val;         /* [parameters], [k] */
    uint32_t *tk_idx, *tk_scratch; /* [k], [parameters] */
    char line[160];                /* the report's line of its figures */
} dt_fedavg;

void dt_fed_weigh(float *slot, int64_t samples, size_t n)
{
    const float weight = (float)samples;
    for (size_t i = 0; i < n; i++)
        slot[i] = weight * slot[i];
}

double dt_fed_weigh_round(float *slots, int k, size_t n, const int64_t *start, const int *sampled,
                          const double *dropped)
{
    double total = 0.0;
    for (int j = 0; j < k; j++) {
        if (dropped != NULL && dropped[j] > 0)
            continue;
        const int64_t nc = start[sampled[j] + 1] - start[sampled[j]];
        dt_fed_weigh(slots + (size_t)j * n, nc, n);
        total += (double)nc;
    }
    return total;
}

void dt_fed_average(const float *w_global, const float *slots, int k, size_t n, double total,
                    const double *dropped, float *out)
{
    int first = 0;
    while (first < k && dropped != NULL && dropped[first] > 0)
        first++;
    if (first == k) { /* nothing to average: the global model stays */
        memmove(out, w_global, n * sizeof(float));
        return;
    }
    memcpy(out, slots + (size_t)first * n, n * sizeof(float));
    for (int j = first + 1; j < k; j++) {
        if (dropped != NULL && dropped[j] > 0)
            continue;
        const float *d = slots + (size_t)j * n;
        for (size_t i = 0; i < n; i++)
            out[i] += d[i];
    }
    /* A division, not a product with 1/total: exact whenever the quotient is. */
    const float t = (float)total;
    for (size_t i = 0; i < n; i++)
        out[i] = w_global[i] + (total > 0 ? out[i] / t : 0.0f);
}

/* A client's dropout and order key: bit 63 set, so it never equals a trainer epoch. */
static uint64_t client_key(int64_t round, int client, int64_t local_epoch)
{
    return (1ULL << 63) | ((uint64_t)round & 0xFFFFFFULL) << 38 |
           ((uint64_t)client & 0xFFFFFULL) << 18 | ((uint64_t)local_epoch & 0x3FFFFULL);
}

/* The compressed wire: a slot is n halves (fp16, bf16) or k (index, value) pairs (topk);
 * uncompressed, the slots are gathered as floats in place. */
static dt_status alloc_wire(dt_fedavg *f)
{
    dt_status st = DT_OK;
    const size_t k = (size_t)f->base.opt.clients_per_round;
    f->ckind = f->base.opt.compress.kind;
    if (f->ckind == DT_COMPRESS_NONE)
        return DT_OK;
    if (f->ckind == DT_COMPRESS_TOPK) {
        f->k = dt_topk_count(f->n, f->base.opt.compress.ratio);
        f->slot_bytes = f->k * (sizeof(uint32_t) + sizeof(float));
        DT_TRY(dt_alloc(f->k * sizeof(float), "top-k values", (void **)&f->tk_val));
        DT_TRY(dt_alloc(f->k * sizeof(uint32_t), "top-k indices", (void **)&f->tk_idx));
        DT_TRY(dt_alloc(f->n * sizeof(uint32_t), "top-k scratch", (void **)&f->tk_scratch));
    } else {
        f->slot_bytes = f->n * sizeof(uint16_t);
    }
    DT_TRY(dt_alloc(f->n * sizeof(float), "client update", (void **)&f->delta));
    DT_TRY(dt_alloc_large(k * f->slot_bytes, "compressed updates", (void **)&f->wire));
fail:
    return st;
}

/* A client's update d (n) into its wire slot. */
static void encode(dt_fedavg *f, const float *d, uint8_t *slot)
{
    if (f->ckind == DT_COMPRESS_FP16) {
        dt_f32_to_f16_n(d, (uint16_t *)(void *)slot, f->n);
    } else if (f->ckind == DT_COMPRESS_BF16) {
        dt_f32_to_bf16_n(d, (uint16_t *)(void *)slot, f->n);
    } else {
        dt_topk_select(d, f->n, f->k, f->tk_idx, f->tk_val, f->tk_scratch);
        memcpy(slot, f->tk_idx, f->k * sizeof(uint32_t));
        memcpy(slot + f->k * sizeof(uint32_t), f->tk_val, f->k * sizeof(float));
    }
}

/* A wire slot back into a dense update d (n). */
static void decode(dt_fedavg *f, const uint8_t *slot, float *d)
{
    if (f->ckind == DT_COMPRESS_FP16) {
        dt_f16_to_f32_n((const uint16_t *)(const void *)slot, d, f->n);
    } else if (f->ckind == DT_COMPRESS_BF16) {
        dt_bf16_to_f32_n((const uint16_t *)(const void *)slot, d, f->n);
    } else {
        memcpy(f->tk_idx, slot, f->k * sizeof(uint32_t));
        memcpy(f->tk_val, slot + f->k * sizeof(uint32_t), f->k * sizeof(float));
        memset(d, 0, f->n * sizeof(float));
        dt_sparse_add(d, f->tk_idx, f->tk_val, f->k);
    }
}

static dt_status fed_attach(dt_strategy *s, dt_model *m, size_t *optim_count)
{
    dt_fedavg *f = (dt_fedavg *)s;
    dt_status st = DT_OK;
    const dt_strategy_options *o = &s->opt;
    s->model = m;
    f->n = dt_model_param_count(m);
    const size_t k = (size_t)o->clients_per_round;
    DT_TRY(dt_alloc(k * sizeof(int), "sampled clients", (void **)&f->sampled));
    DT_TRY(dt_alloc(f->n * sizeof(float), "global model", (void **)&f->global));
    DT_TRY(dt_alloc_large(k * f->n * sizeof(float), "client updates", (void **)&f->slots));
    DT_TRY(dt_alloc((2 + k) * sizeof(double), "round sums", (void **)&f->sums));
    DT_TRY(dt_alloc((size_t)f->size * sizeof(size_t), "slots", (void **)&f->counts));
    DT_TRY(dt_alloc((size_t)f->size * sizeof(size_t), "slots", (void **)&f->displs));
    DT_TRY(dt_alloc((size_t)dt_model_max_batch(m) * sizeof(int64_t), "batch", (void **)&f->batch));
    DT_TRY(alloc_wire(f));
    const size_t per_slot = f->ckind == DT_COMPRESS_NONE ? f->n : f->slot_bytes;
    for (int r = 0; r < f->size; r++) {
        int64_t b, c;
        dt_strategy_part(o->clients_per_round, f->size, r, &b, &c);
        f->counts[r] = (size_t)c * per_slot;
        f->displs[r] = (size_t)b * per_slot;
    }
    /* The trainer's optimizer is each client's in turn, its state reset per client. */
    *optim_count = f->n;
fail:
    return st;
}

/* The training set's partition over the clients (client_of[i] for each of the n samples,
 * from dt_fed_assign) as each client's samples, ascending. */
static dt_status set_partition(dt_fedavg *f, const int64_t *client_of, int64_t n)
{
    dt_strategy *s = &f->base;
    dt_status st = DT_OK;
    const int clients = s->opt.clients;
    int64_t largest = 0;
    DT_TRY(dt_alloc((size_t)(clients + 1) * sizeof(int64_t), "clients", (void **)&f->start));
    DT_TRY(dt_alloc((size_t)n * sizeof(int64_t), "client samples", (void **)&f->idx));
    for (int64_t i = 0; i < n; i++)
        f->start[client_of[i] + 1]++;
    for (int c = 0; c < clients; c++) {
        largest = f->start[c + 1] > largest ? f->start[c + 1] : largest;
        f->start[c + 1] += f->start[c];
    }
    int64_t *fill = NULL;
    DT_TRY(dt_alloc((size_t)clients * sizeof(int64_t), "clients", (void **)&fill));
    for (int64_t i = 0; i < n; i++) /* ascending within a client */
        f->idx[f->start[client_of[i]] + fill[client_of[i]]++] = i;
    dt_free(fill);
    DT_TRY(dt_alloc((size_t)(largest > 0 ? largest : 1) * sizeof(int64_t), "client order",
                    (void **)&f->order));
fail:
    return st;
}

/* The run's cut: a round is an "epoch" of one step, and the rounds are the run's length.
 * The partition is the same on every rank: a pure function of the seed (fed.h). */
static dt_status fed_plan_run(dt_strategy *s, const dt_run_facts *facts, dt_run_plan *plan)
{
    dt_fedavg *f = (dt_fedavg *)s;
    const dt_strategy_options *o = &s->opt;
    dt_status st = DT_OK;
    const int64_t n = facts->n_train;
    DT_TRY(dt_alloc((size_t)n * sizeof(int64_t), "client of sample", (void **)&f->client_of));
    DT_TRY(dt_alloc((size_t)o->clients * sizeof(int64_t), "client sizes", (void **)&f->sizes));
    DT_TRY(dt_fed_assign(&o->partition, facts->labels, n, facts->num_classes, o->clients, o->seed,
                         f->client_of, f->sizes, &f->moved));
    DT_TRY(set_partition(f, f->client_of, n));
    f->local_batch = facts->batch;
    plan->epochs = o->rounds;
    plan->steps_per_epoch = 1;
    plan->epoch_word = "round";
    plan->length_key = "fedavg.rounds";
fail:
    return st;
}

/* A round's samples: its clients' local epochs or steps, added up (its samples/s and its
 * loss's mean are over these). */
static int64_t fed_step_samples(dt_strategy *s, int64_t round, int64_t samples)
{
    dt_fedavg *f = (dt_fedavg *)s;
    const dt_strategy_options *o = &s->opt;
    (void)samples;
    dt_fed_sample(o->clients, o->clients_per_round, o->seed, round, f->sampled);
    int64_t sum = 0;
    for (int j = 0; j < o->clients_per_round; j++)
        sum += dt_fed_local_samples(f->sizes[f->sampled[j]], f->local_batch, o->local_epochs,
                                    o->local_steps);
    return sum;
}

static void fed_partition(const dt_strategy *s, const int64_t **client_of, int64_t *moved)
{
    const dt_fedavg *f = (const dt_fedavg *)s;
    *client_of = f->client_of;
    *moved = f->moved;
}

static void fed_free(dt_strategy *s)
{
    dt_fedavg *f = (dt_fedavg *)s;
    dt_free(f->start);
    dt_free(f->idx);
    dt_free(f->order);
    dt_free(f->batch);
    dt_free(f->sampled);
    dt_free(f->client_of);
    dt_free(f->sizes);
    dt_free(f->global);
    dt_free(f->slots);
    dt_free(f->sums);
    dt_free(f->counts);
    dt_free(f->displs);
    dt_free(f->wire);
    dt_free(f->delta);
    dt_free(f->tk_val);
    dt_free(f->tk_idx);
    dt_free(f->tk_scratch);
    dt_comm_free(f->comm);
    dt_free(f);
}

static dt_status fed_start(dt_strategy *s)
{
    if (((dt_fedavg *)s)->start == NULL)
        return dt_fail(DT_ERR_INVALID, "fedavg: no partition of the training set was given");
    return dt_strategy_start_replicas(s, ((dt_fedavg *)s)->comm, 0);
}

/* One batch of client c's local training: forward, loss (the batch's mean), backward,
 * FedProx's pull towards the round's model, the optimizer's step. */
static dt_status local_batch(dt_fedavg *f, const dt_step_io *io, int64_t count, int64_t first,
                             uint64_t key, double lr, double *loss_sum)
{
    dt_status st = DT_OK;
    dt_model *m = f->base.model;
    dt_forward_ctx fwd;
    const double t0 = dt_now();
    DT_TRY(io->load_samples(io->ctx, f->batch, count, first, key, &fwd));
    const double t1 = dt_now();
    dt_model_zero_grads(m);
    DT_TRY(dt_model_forward(m, count, &fwd));
    double ls = 0.0; /* io->loss writes the batch's sum */
    DT_TRY(io->loss(io->ctx, 0, count, (double)count, &ls));
    *loss_sum += ls;
    const double t2 = dt_now();
    DT_TRY(dt_model_backward(m, count, NULL));
    const double t3 = dt_now();
    float *g = dt_model_grads(m), *w = dt_model_params(m);
    const float mu = (float)f->base.opt.fedprox_mu;
    for (size_t i = 0; mu > 0.0f && i < f->n; i++)
        g[i] += mu * (w[i] - f->global[i]);
    /* optim.clip_norm: the client's gradient (FedProx's term in it, as when the term is
     * part of the loss) clipped by its own norm. A norm that is not finite means a gradient
     * that is not: the update then holds it, and the round's check finds the client. */
    if (dt_strategy_clip(&f->base, g, 0, f->n, NULL) == DT_ERR_NONFINITE) {
        f->base.bad = (dt_nonfinite){0, -1, 0};
        f->base.grad_scale = 1.0;
    }
    dt_optim_step_team(f->base.optim, w, g, f->n, lr, f->base.grad_scale, NULL);
    dt_obs_phase(f->base.obs, DT_PHASE_DATA, t0, t1, -1);
    dt_obs_phase(f->base.obs, DT_PHASE_FORWARD, t1, t2, -1);
    dt_obs_phase(f->base.obs, DT_PHASE_BACKWARD, t2, t3, -1);
    dt_obs_phase(f->base.obs, DT_PHASE_OPTIM, t3, dt_now(), -1);
fail:
    return st;
}

/* Client c's round: from the global model, its local epochs (or steps), then its update
 * w_c - w_t into slot j (the slots' floats uncompressed; the wire's slot j compressed).
 * *bad: 1 when its loss or its update is not finite; otherwise adds its loss sum and
 * samples (a dropped client's are in no figure of the round). */
static dt_status train_client(dt_fedavg *f, const dt_step_io *io, int c, int64_t round, double lr,
                              int64_t j, double *loss_sum, int64_t *samples, double *bad)
{
    dt_status st = DT_OK;
    const dt_strategy_options *o = &f->base.opt;
    const int64_t nc = f->start[c + 1] - f->start[c], bs = dt_model_max_batch(f->base.model);
    const int64_t *mine = f->idx + f->start[c];
    float *w = dt_model_params(f->base.model), *bufs[2] = {NULL, NULL};
    memcpy(w, f->global, f->n * sizeof(float));
    const int64_t rounds = dt_optim_steps(f->base.optim); /* a fresh optimizer per client */
    const int nb = dt_optim_state_buffers(f->base.optim, bufs, 2);
    for (int b = 0; b < nb; b++)
        memset(bufs[b], 0, f->n * sizeof(float));
    dt_optim_set_steps(f->base.optim, 0);
    double loss = 0.0;
    int64_t done = 0;
    const int64_t per_epoch = (nc + bs - 1) / bs;
    const int64_t steps = o->local_steps > 0 ? o->local_steps : o->local_epochs * per_epoch;
    for (int64_t s = 0, e = 0; s < steps && nc > 0; e++) {
        const uint64_t key = client_key(round, c, e);
        dt_rng_permutation(o->seed, key, nc, f->order);
        for (int64_t off = 0; off < nc && s < steps; off += bs, s++) {
            const int64_t cnt = nc - off < bs ? nc - off : bs;
            for (int64_t i = 0; i < cnt; i++)
                f->batch[i] = mine[f->order[off + i]];
            DT_TRY(local_batch(f, io, cnt, off, key, lr, &loss));
            done += cnt;
        }
    }
    float *d = f->ckind == DT_COMPRESS_NONE ? f->slots + (size_t)j * f->n : f->delta;
    for (size_t i = 0; i < f->n; i++)
        d[i] = w[i] - f->global[i];
    *bad = !isfinite(loss) || dt_any_nonfinite(d, f->n, NULL);
    if (!*bad) {
        *loss_sum += loss;
        *samples += done;
    }
    if (f->ckind != DT_COMPRESS_NONE)
        encode(f, d, f->wire + (size_t)j * f->slot_bytes);
fail:
    dt_optim_set_steps(f->base.optim, rounds);
    return st;
}

/* The rank that simulates slot j. */
static int slot_owner(const dt_fedavg *f, int j)
{
    for (int r = 0; r < f->size; r++) {
        int64_t b, c;
        dt_strategy_part(f->base.opt.clients_per_round, f->size, r, &b, &c);
        if (j >= b && j < b + c)
            return r;
    }
    return 0;
}

/* After the round's all-reduce, the same on every rank, when some client's slot is marked
 * not finite. Under train.on_nonfinite skip, while some client is left, the round drops
 * the bad ones (their slots are left out of the average, as a client that fails is left
 * out of a FedAvg round) and says so in the step's note. Otherwise (stop, or every client
 * bad) the parameters go back to the round's w_t (local training wrote over them) and the
 * round fails naming the first such client and the rank that simulated it. */
static dt_status check_round(dt_fedavg *f, float *w)
{
    const int k = f->base.opt.clients_per_round;
    int bad = 0, first = -1;
    for (int j = 0; j < k; j++)
        if (f->sums[2 + j] > 0 && bad++ == 0)
            first = j;
    if (bad == 0)
        return DT_OK;
    if (bad < k && !f->base.opt.nonfinite_stop) {
        char *note = f->base.note;
        const size_t cap = sizeof f->base.note;
        int used = snprintf(note, cap,
                            "%d of its %d clients dropped for a NaN or Inf in the loss or "
                            "update:",
                            bad, k);
        for (int j = 0, said = 0; j < k && used > 0 && (size_t)used < cap; j++) {
            if (f->sums[2 + j] <= 0)
                continue;
            if (said++ == 3) { /* the count says how many more */
                used += snprintf(note + used, cap - (size_t)used, ", ...");
                break;
            }
            used += snprintf(note + used, cap - (size_t)used,
                             "%s client %d (slot %d, simulated on rank %d)", said > 1 ? "," : "",
                             f->sampled[j], j, slot_owner(f, j));
        }
        if (used > 0 && (size_t)used < cap)
            snprintf(note + used, cap - (size_t)used, "; the others averaged");
        return DT_OK;
    }
    memcpy(w, f->global, f->n * sizeof(float));
    const int owner = slot_owner(f, first);
    f->base.bad = (dt_nonfinite){bad, owner, DT_NONFINITE_LOSS};
    return dt_fail(DT_ERR_NONFINITE,
                   "a NaN or Inf in the loss or update of client %d (slot %d, simulated on rank "
                   "%d; %d client%s of the round in all)",
                   f->sampled[first], first, owner, bad, bad > 1 ? "s" : "");
}

static dt_status fed_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                          double *loss_sum)
{
    dt_fedavg *f = (dt_fedavg *)s;
    dt_status st = DT_OK;
    const dt_strategy_options *o = &s->opt;
    const int64_t round = plan->epoch;
    float *w = dt_model_params(s->model);
    dt_fed_sample(o->clients, o->clients_per_round, o->seed, round, f->sampled);
    memcpy(f->global, w, f->n * sizeof(float));
    int64_t first, mine, samples = 0;
    dt_strategy_part(o->clients_per_round, f->size, f->rank, &first, &mine);
    double *sums = f->sums; /* local loss sum, local samples, the slots not finite */
    memset(sums, 0, (2 + (size_t)o->clients_per_round) * sizeof(double));
    for (int64_t j = first; j < first + mine; j++)
        DT_TRY(train_client(f, io, f->sampled[j], round, plan->lr, j, &sums[0], &samples,
                            &sums[2 + j]));
    sums[1] = (double)samples;
    const double t0 = dt_now();
    if (f->ckind == DT_COMPRESS_NONE)
        DT_TRY(dt_comm_allgatherv(f->comm, f->slots + (size_t)first * f->n, f->slots, f->counts,
                                  f->displs, DT_COMM_FLOAT32));
    else
        DT_TRY(dt_comm_allgatherv(f->comm, f->wire + (size_t)first * f->slot_bytes, f->wire,
                                  f->counts, f->displs, DT_COMM_UINT8));
    DT_TRY(dt_comm_allreduce(f->comm, sums, sums, 2 + (size_t)o->clients_per_round, DT_COMM_FLOAT64,
                             DT_COMM_SUM));
    dt_obs_phase(s->obs, DT_PHASE_COMM, t0, dt_now(), -1);
    DT_TRY(check_round(f, w));
    /* The server's average, in slot order on every rank: each update decoded, weighed by
     * its client's samples. */
    const double *dropped = sums + 2; /* the clients check_round dropped, if any */
    for (int j = 0; f->ckind != DT_COMPRESS_NONE && j < o->clients_per_round; j++)
        if (dropped[j] <= 0)
            decode(f, f->wire + (size_t)j * f->slot_bytes, f->slots + (size_t)j * f->n);
    const double total =
        dt_fed_weigh_round(f->slots, o->clients_per_round, f->n, f->start, f->sampled, dropped);
    dt_fed_average(f->global, f->slots, o->clients_per_round, f->n, total, dropped, w);
    /* A local step's norm says nothing of the round. */
    s->grad_norm = NAN;
    /* The round's loss: the clients' local training loss, as a sum over the step's samples. */
    *loss_sum = sums[1] > 0 ? sums[0] / sums[1] * (double)plan->samples : 0.0;
fail:
    return st;
}

static dt_status fed_update(dt_strategy *s, dt_optim *o, double lr)
{
    (void)s;
    (void)lr;
    dt_optim_count_step(o); /* the round is done; the schedule counts rounds */
    return DT_OK;
}

/* The test set over every rank, the sums combined. */
static dt_status fed_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io,
                              double *loss_sum, double *correct)
{
    dt_fedavg *f = (dt_fedavg *)s;
    double sums[2] = {0.0, 0.0};
    const int replicas = s->info.replicas, replica = s->info.replica;
    s->info.replicas = f->size; /* eval_share splits over replicas: here, every rank */
    s->info.replica = f->rank;
    dt_status st = dt_strategy_eval_share(s, n_test, io, &sums[0], &sums[1]);
    s->info.replicas = replicas;
    s->info.replica = replica;
    if (st == DT_OK)
        st = dt_comm_allreduce(f->comm, sums, sums, 2, DT_COMM_FLOAT64, DT_COMM_SUM);
    *loss_sum = sums[0];
    *correct = sums[1];
    return st;
}

static dt_status fed_gather_optim(dt_strategy *s, const float *slice, size_t lo, size_t n,
                                  float *out)
{
    (void)s;
    memcpy(out, slice + lo, n * sizeof(float));
    return DT_OK;
}

static void fed_describe(const dt_strategy *s, dt_figures *out)
{
    const dt_fedavg *f = (const dt_fedavg *)s;
    /* This rank's clients' updates: what it hands the all-gather each round. */
    const size_t mine = f->counts[f->rank] / (f->ckind == DT_COMPRESS_NONE ? f->n : f->slot_bytes);
    const size_t dense = mine * f->n * sizeof(float);
    const size_t wire = f->ckind == DT_COMPRESS_NONE ? dense : f->counts[f->rank];
    /* Reported where compression changes what crosses: what it saves. */
    const int told = f->ckind != DT_COMPRESS_NONE && wire > 0;
    dt_figures_add(out, (dt_figure){.name = "dp", .line = f->line, .unit = "", .value = 1});
    dt_figures_add(out, (dt_figure){.name = "wire_bytes_per_step",
                                    .what = told ? "sent per round by this rank's clients" : NULL,
                                    .line = f->line,
                                    .unit = "B",
                                    .value = (double)wire});
    dt_figures_add(out, (dt_figure){.name = "dense_bytes_per_step",
                                    .what = told ? "in float32" : NULL,
                                    .line = f->line,
                                    .unit = "B",
                                    .value = (double)dense});
    if (told)
        dt_figures_add(out, (dt_figure){.what = "compression ratio",
                                        .line = f->line,
                                        .unit = "",
                                        .value = (double)dense / (double)wire});
}

static dt_status fed_time_alone(dt_strategy *s, int reps, double *seconds)
{
    (void)s;
    (void)reps;
    *seconds = 0.0;
    return dt_fail(DT_ERR_UNSUPPORTED, "fedavg: no gradient all-reduce to time");
}

static void fed_summary(const dt_strategy *s, char *buf, size_t nbytes)
{
    const dt_strategy_options *o = &s->opt;
    char local[48];
    if (o->local_steps > 0)
        snprintf(local, sizeof local, "%lld local steps", (long long)o->local_steps);
    else
        snprintf(local, sizeof local, "%d local epoch%s", o->local_epochs,
                 o->local_epochs == 1 ? "" : "s");
    snprintf(buf, nbytes, " (fedavg: %d of %d clients per round, %s, %lld rounds)",
             o->clients_per_round, o->clients, local, (long long)o->rounds);
}

static const dt_strategy_ops fed_ops = {
    .summary = fed_summary,
    .attach = fed_attach,
    .start = fed_start,
    .step = fed_step,
    .update = fed_update,
    .evaluate = fed_evaluate,
    .describe = fed_describe,
    .time_comm_alone = fed_time_alone,
    .gather_optim = fed_gather_optim,
    .plan_run = fed_plan_run,
    .step_samples = fed_step_samples,
    .partition = fed_partition,
    .free = fed_free,
};

dt_status dt_fedavg_create(const dt_strategy_options *opt, dt_comm *world, dt_grid *grid,
                           dt_strategy **out)
{
    dt_fedavg *f = NULL;
    *out = NULL;
    dt_status st = dt_alloc(sizeof *f, "federated averaging", (void **)&f);
    if (st != DT_OK)
        return st;
    f->base.ops = &fed_ops;
    f->base.opt = *opt;
    f->base.grid = grid;
    f->base.world = world;
    f->rank = dt_comm_rank(world);
    f->size = dt_comm_size(world);
    dt_strategy_info *i = &f->base.info;
    i->name = "fedavg";
    i->replicas = 1;      /* a batch is one client's local batch */
    i->replica = f->rank; /* rank 0 alone writes the checkpoint's part */
    i->role = "clients";  /* each rank trains its share of a round's clients */
    char mode[64];
    dt_compress_format(&opt->compress, mode, sizeof mode);
    snprintf(f->line, sizeof f->line, "fedavg, client updates compressed (%s%s)", mode,
             opt->compress.kind == DT_COMPRESS_TOPK
                 ? ", no error feedback: clients keep no state between rounds"
                 : "");
    *out = &f->base;
    return dt_comm_dup(world, "fedavg", &f->comm);
}
/* fedavg: clients simulated on a flat world; no tp, pp or ZeRO under it. */
dt_status dt_fedavg_check(const dt_strategy_options *o, int world, int tp, int pp)
{
    (void)world;
    if (tp > 1 || pp > 1 || o->zero)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.strategy fedavg: runs without tensor or pipeline parallelism "
                       "or ZeRO (tp %d, pp %d, zero %d)",
                       tp, pp, o->zero);
    if (o->compress.kind == DT_COMPRESS_POWERSGD)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress: powersgd is built for ddp and ps; fedavg's "
                       "client updates go as none, fp16, bf16 or topk");
    if (o->compress.warmup > 0) /* options filled by a program, not from a config */
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "parallel.compress_warmup: applies to ddp and ps; fedavg compresses "
                       "every round's client updates");
    if (o->given[DT_SO_DP] != NULL && o->dp > 0)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect under --strategy fedavg: its clients are spread over "
                       "every rank of the job",
                       o->given[DT_SO_DP]);
    if (o->given[DT_SO_LOCAL_EPOCHS] != NULL && o->local_steps > 0)
        return dt_fail(DT_ERR_INVALID,
                       "%s has no effect with fedavg.local_steps %lld: each client takes that "
                       "many local steps instead of local epochs",
                       o->given[DT_SO_LOCAL_EPOCHS], (long long)o->local_steps);
    if (o->clients < 1 || o->clients_per_round < 1 || o->clients_per_round > o->clients)
        return dt_fail(DT_ERR_INVALID,
                       "fedavg.clients_per_round: %d of %d clients (need 1 <= K <= clients)",
                       o->clients_per_round, o->clients);
    if (o->local_epochs < 1 && o->local_steps < 1)
        return dt_fail(DT_ERR_INVALID, "fedavg: local_epochs or local_steps must be >= 1");
    if (!(o->fedprox_mu >= 0.0))
        return dt_fail(DT_ERR_INVALID, "fedavg.fedprox_mu: %g (>= 0)", o->fedprox_mu);
    return DT_OK;
}

const dt_strategy_def dt_fedavg_def = {
    .name = "fedavg",
    .help = "federated averaging over simulated clients ([fedavg])",
    .uses = DT_SO_USES_AXES | DT_SO_USES_FEDAVG | DT_SO_USES_CLIP,
    .flat = 1,
    .no_plan = "its rounds all-gather the sampled clients' updates, which the plan does not "
               "model yet",
    .check = dt_fedavg_check,
    .create = dt_fedavg_create,
};
