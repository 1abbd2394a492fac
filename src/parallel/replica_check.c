/* replica_check.c — `dtrain train --check-replicas` (dt_strategy_check_replicas): after
 * training, every copy of each parameter compared bit for bit with the other copies the
 * grid keeps of it. The layouts promise those copies equal after every step (the same
 * reduced gradients, the same update): a data-parallel replica holds every tensor (its
 * tensor-parallel part) as the other replicas do; the ranks of a tensor-parallel group
 * hold the whole tensors (LayerNorms, the biases added after the sum, the embeddings) each;
 * a pipeline whose head is on another stage than the embedding holds the tied table twice
 * (tie.c). A rank fingerprints its tensors and gathers its group's fingerprints, so a copy
 * that drifted (a gradient summed on one side only, a part assigned twice) is named
 * without moving the parameters. The ranks agree on the first difference found, so every
 * rank returns the same verdict. Allocates (a group's fingerprints): after training, never
 * in a step. */
#include <stdio.h>
#include <string.h>

#include "parallel/strategy_impl.h"

enum { KIND_DP, KIND_TP, KIND_TIE, KINDS };

static const char *const kind_words[KINDS] = {
    "between data-parallel replicas",
    "between tensor-parallel ranks that each hold it whole",
    "between the tied table's copies (the embedding's stage and the head's)",
};

#define MSG_INTS 32 /* the message crossing ranks: 256 bytes */

static int takes(int kind, const dt_param_info *p)
{
    switch (kind) {
    case KIND_DP:
        return 1;
    case KIND_TP:
        return p->split_dim < 0;
    default:
        return p->tie != DT_TIE_NONE;
    }
}

/* 64-bit FNV-style over the values' bit patterns: any one element that differs changes it
 * (each round is a bijection of the state), and so do -0 against 0 and NaN payloads. */
static int64_t fingerprint(const float *x, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, x + i, sizeof w);
        h = (h ^ w) * 1099511628211ull;
    }
    int64_t out;
    memcpy(&out, &h, sizeof out);
    return out;
}

/* The name of this rank's i-th tensor of `kind`. */
static const char *kind_name(const dt_model *m, int kind, int64_t i)
{
    for (int t = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *p = dt_model_tensor(m, t);
        if (takes(kind, p) && i-- == 0)
            return p->name;
    }
    return "?";
}

/* Compares the tensors of `kind` over group c: each rank's record is its world rank, its
 * count of them and their fingerprints. The first difference goes to msg (*bad set). */
static dt_status compare(dt_strategy *s, int kind, dt_comm *c, char *msg, size_t len, int *bad)
{
    if (c == NULL || dt_comm_size(c) < 2)
        return DT_OK;
    const dt_model *m = s->model;
    const float *x = dt_model_params(s->model);
    int64_t n = 0, nmax = 0;
    for (int t = 0; t < dt_model_tensor_count(m); t++)
        n += takes(kind, dt_model_tensor(m, t));
    dt_status st = dt_comm_allreduce(c, &n, &nmax, 1, DT_COMM_INT64, DT_COMM_MAX);
    if (st != DT_OK)
        return st;
    const size_t rec = 2 + (size_t)nmax, size = (size_t)dt_comm_size(c);
    int64_t *buf = NULL;
    DT_TRY(dt_alloc(sizeof(int64_t) * rec * (size + 1), "replica fingerprints", (void **)&buf));
    int64_t *mine = buf + rec * size;
    memset(mine, 0, sizeof(int64_t) * rec);
    mine[0] = s->info.world_rank;
    mine[1] = n;
    for (int t = 0, k = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *p = dt_model_tensor(m, t);
        if (takes(kind, p))
            mine[2 + k++] = fingerprint(x + p->offset, p->count);
    }
    DT_TRY(dt_comm_allgather(c, mine, buf, rec, DT_COMM_INT64));
    const int64_t *first = buf;
    for (size_t r = 1; r < size && !*bad; r++) {
        const int64_t *other = buf + rec * r;
        if (other[1] != first[1]) {
            snprintf(msg, len,
                     "replica check: world rank %lld holds %lld tensors to compare %s, world "
                     "rank %lld holds %lld",
                     (long long)other[0], (long long)other[1], kind_words[kind],
                     (long long)first[0], (long long)first[1]);
            *bad = 1;
        }
        for (int64_t i = 0; i < n && !*bad; i++)
            if (other[2 + i] != first[2 + i]) {
                snprintf(msg, len,
                         "replica check: %s differs %s: world rank %lld's copy is not the same "
                         "bits as world rank %lld's",
                         kind_name(m, kind, i), kind_words[kind], (long long)other[0],
                         (long long)first[0]);
                *bad = 1;
            }
    }
fail:
    dt_free(buf);
    return st;
}

dt_status dt_strategy_check_replicas(dt_strategy *s, dt_replica_check *out)
{
    DT_ASSERT(s != NULL && s->model != NULL && out != NULL);
    dt_status st = DT_OK;
    if (s->param_slice != NULL)
        return dt_fail(DT_ERR_UNSUPPORTED, "replica check: under ZeRO-3 every parameter is "
                                           "held once, in one rank's slice: no copies to "
                                           "compare");
    const dt_grid *g = s->grid;
    const int dp = dt_grid_size(g, DT_GRID_DP), tp = dt_grid_size(g, DT_GRID_TP);
    dt_comm *over[KINDS] = {dp > 1 ? dt_grid_comm(g, DT_GRID_DP) : NULL,
                            tp > 1 ? dt_grid_comm(g, DT_GRID_TP) : NULL, s->tie_comm};
    char msg[MSG_INTS * sizeof(int64_t)] = "";
    int bad = 0;
    for (int k = 0; k < KINDS; k++)
        DT_TRY(compare(s, k, over[k], msg, sizeof msg, &bad));
    /* What was compared, counted once per stage (its dp 0, tp 0 rank), and the verdict:
     * the lowest world rank that found a difference sends its message to every rank. */
    const dt_model *m = s->model;
    const int counts = dt_grid_rank(g, DT_GRID_DP) == 0 && dt_grid_rank(g, DT_GRID_TP) == 0;
    int64_t mine[4] = {0, 0, 0, bad ? s->info.world_rank : INT64_MAX}, sum[3], first = 0;
    for (int t = 0; counts && t < dt_model_tensor_count(m); t++) {
        mine[0]++;
        mine[1] += tp > 1 && takes(KIND_TP, dt_model_tensor(m, t));
    }
    if (counts && s->tie_comm != NULL && s->info.pp_rank < 63)
        mine[2] = (int64_t)1 << s->info.pp_rank;
    dt_comm *world = dt_grid_world(g);
    DT_TRY(dt_comm_allreduce(world, mine, sum, 3, DT_COMM_INT64, DT_COMM_SUM));
    DT_TRY(dt_comm_allreduce(world, mine + 3, &first, 1, DT_COMM_INT64, DT_COMM_MIN));
    *out = (dt_replica_check){
        .dp = dp, .tensors = sum[0], .tp = tp, .tp_whole = sum[1], .tied = (uint64_t)sum[2]};
    if (first == INT64_MAX)
        return DT_OK;
    int64_t words[MSG_INTS];
    memcpy(words, msg, sizeof words);
    DT_TRY(dt_comm_bcast(world, words, MSG_INTS, DT_COMM_INT64, (int)first));
    memcpy(msg, words, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    return dt_fail(DT_ERR_MISMATCH, "%s", msg);
fail:
    return st;
}
