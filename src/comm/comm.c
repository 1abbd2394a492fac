/* comm.c — handles: creation from an MPI communicator or without MPI, duplication and
 * splitting, options, persistent buffers, counters.
 *
 * A handle owns two duplicates of the caller's communicator — data (collectives and our
 * point-to-point traffic) and control (the watchdog and --comm-check exchanges, which
 * must never match data messages) — both with MPI_ERRORS_RETURN. Everything a call needs
 * is sized here, once: the request pool with its per-request arrays and engine memory
 * (as much as the hungriest engine needs: dt_cx_engine_state_bytes), the watchdog's
 * records, and DT_SLOT_GROUPS groups of receive slots (chunk_bytes each, pre-touched by
 * dt_alloc_large's zeroing, on huge pages where they fill one), so that collectives allocate
 * nothing in a steady state. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

dt_comm_options dt_comm_options_default(void)
{
    dt_comm_options o;
    memset(&o, 0, sizeof o);
    o.algorithm = DT_COMM_ALGO_AUTO;
    o.deterministic = 0;
    o.timeout_s = 300.0;
    o.check = 0;
    o.direct_max_bytes = (size_t)16 << 10;
    o.ring_min_bytes = (size_t)1 << 20;
    o.chunk_bytes = (size_t)256 << 10;
    return o;
}

static size_t align64(size_t x)
{
    return (x + 63u) & ~(size_t)63u;
}

/* A request's arrays and its engine memory, carved from base; base NULL only counts. */
static size_t layout_request(const dt_comm *c, dt_comm_req *q, char *base)
{
    size_t n = (size_t)c->size;
    dt_cx_carver k = {base, 0};
    size_t *boff = dt_cx_carve(&k, n * sizeof(size_t));
    size_t *blen = dt_cx_carve(&k, n * sizeof(size_t));
    int64_t *check = dt_cx_carve(&k, n * DT_CHECK_FIELDS * sizeof(int64_t));
    void *engine_state = dt_cx_carve(&k, dt_cx_engine_state_bytes(c));
    if (q != NULL) {
        q->boff = boff;
        q->blen = blen;
        q->check = check;
        q->engine_state = engine_state;
    }
    return k.used;
}

static dt_status alloc_slots(dt_comm *c)
{
    dt_free(c->slots);
    c->slots = NULL;
    c->slot_bytes = align64(c->opt.chunk_bytes);
    if (c->size < 2)
        return DT_OK; /* a group of one moves nothing */
    size_t bytes = DT_SLOT_GROUPS * c->nslots * c->slot_bytes;
    void *p = NULL;
    dt_status st = dt_alloc_large(bytes, "comm receive slots", &p);
    if (st != DT_OK)
        return st;
    c->slots = p;
    return DT_OK;
}

static void free_mem(dt_comm *c)
{
    if (c == NULL)
        return;
    if (c->hist != NULL)
        dt_cx_family_leave(c);
    dt_free(c->pool_mem);
    dt_free(c->pool);
    dt_free(c->slots);
    for (int g = 0; g < DT_SLOT_GROUPS; g++)
        dt_free(c->scratch[g]);
    dt_free(c->world_ranks);
    dt_free(c->wd_recs);
    dt_free(c->wd_answer);
    dt_free(c->wd_seen);
    dt_free(c->wd_reqs);
    dt_cx_history_release(c->hist);
    dt_free(c);
}

/* A handle of `size` ranks with everything allocated; MPI fields left for the caller. */
static dt_status comm_new(int rank, int size, const char *name, dt_cx_history *shared,
                          const dt_comm_options *opt, dt_comm **out)
{
    dt_status st = DT_OK;
    void *p = NULL;
    dt_comm *c = NULL;
    *out = NULL;
    DT_TRY(dt_alloc(sizeof *c, "comm handle", &p));
    c = p;
    c->rank = rank;
    c->size = size;
    c->data = c->ctrl = MPI_COMM_NULL;
    for (int t = 0; t < DT_CX_OWN_TYPES; t++)
        for (int k = 0; k < DT_CX_OWN_OPS; k++)
            c->own_op[t][k] = MPI_OP_NULL;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "world");
    c->opt = opt ? *opt : dt_comm_options_default();
    c->max_count = INT_MAX;
    if (shared) {
        shared->refs++;
        c->hist = shared;
    } else {
        DT_TRY(dt_cx_history_create(&c->hist));
    }
    size_t n = (size_t)size;
    DT_TRY(dt_alloc(n * sizeof(int), "comm ranks", &p));
    c->world_ranks = p;
    for (int i = 0; i < size; i++)
        c->world_ranks[i] = i;

    /* Slots per group, also a ring or det window's capacity: a det chunk group needs N-1
     * receives; 8 keeps a 2-rank ring pipelined. */
    size_t nslots = n > 1 ? 2 * (n - 1) : 1;
    c->nslots = nslots < 8 ? 8 : nslots;
    DT_TRY(dt_alloc(DT_COMM_MAX_PENDING * sizeof(dt_comm_req), "comm requests", &p));
    c->pool = p;
    size_t per = layout_request(c, NULL, NULL);
    DT_TRY(dt_alloc(per * DT_COMM_MAX_PENDING, "comm request arrays", &c->pool_mem));
    for (int i = 0; i < DT_COMM_MAX_PENDING; i++) {
        dt_comm_req *q = &c->pool[i];
        q->comm = c;
        q->state = DT_REQ_FREE;
        q->act_index = -1;
        c->freel[DT_COMM_MAX_PENDING - 1 - i] = q; /* pool[0] on top */
        layout_request(c, q, (char *)c->pool_mem + per * (size_t)i);
        q->check_req = MPI_REQUEST_NULL;
    }
    c->nfree = DT_COMM_MAX_PENDING;
    DT_TRY(dt_alloc(n * DT_WD_FIELDS * sizeof(int64_t), "comm watchdog", &p));
    c->wd_recs = p;
    DT_TRY(dt_alloc(n * DT_WD_FIELDS * sizeof(int64_t), "comm watchdog", &p));
    c->wd_answer = p;
    DT_TRY(dt_alloc(n * DT_WD_FIELDS * sizeof(int64_t), "comm watchdog", &p));
    c->wd_seen = p;
    for (size_t i = 0; i < n; i++)
        c->wd_seen[i * DT_WD_FIELDS + DT_WD_STATE_FIELD] = -1; /* nothing heard */
    DT_TRY(dt_alloc(2 * n * sizeof(MPI_Request), "comm watchdog", &p));
    c->wd_reqs = p;
    c->report = c->hist->report;
    DT_TRY(alloc_slots(c));
    c->stats.buffer_bytes = c->slots ? DT_SLOT_GROUPS * c->nslots * c->slot_bytes : 0;
    dt_cx_family_join(c);
    *out = c;
    return DT_OK;
fail:
    free_mem(c);
    return st;
}

dt_status dt_comm_create_self(dt_comm **out)
{
    DT_ASSERT(out != NULL);
    return comm_new(0, 1, "world", NULL, NULL, out);
}

/* "comm: group 'NAME': WHAT: <MPI's error string>" (validate.c). */
static dt_status mpi_fail(const char *what, const char *name, int err)
{
    return dt_cx_group_mpi_fail(name, what, err);
}

/* Our own reductions for MPI (comm_internal.h, validate.c): the binary step of our own
 * engines (reduce_ops.c), so that MPI's results follow comm.h's rules (uint8 sums wrap,
 * 16-bit floats round as comm.h says). MPI asks for inout = in op inout, `in` the lower
 * rank's operand when it keeps an order. */
#define OWN_OP_FN(NAME, DTYPE, OP)                                                                 \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *type)                          \
    {                                                                                              \
        (void)type;                                                                                \
        dt_cx_reduce2(inout, in, inout, (size_t)*len, DTYPE, OP);                                  \
    }
OWN_OP_FN(u8_sum_fn, DT_COMM_UINT8, DT_COMM_SUM)
OWN_OP_FN(u8_max_fn, DT_COMM_UINT8, DT_COMM_MAX)
OWN_OP_FN(u8_min_fn, DT_COMM_UINT8, DT_COMM_MIN)
OWN_OP_FN(f16_sum_fn, DT_COMM_FLOAT16, DT_COMM_SUM)
OWN_OP_FN(f16_max_fn, DT_COMM_FLOAT16, DT_COMM_MAX)
OWN_OP_FN(f16_min_fn, DT_COMM_FLOAT16, DT_COMM_MIN)
OWN_OP_FN(bf16_sum_fn, DT_COMM_BFLOAT16, DT_COMM_SUM)
OWN_OP_FN(bf16_max_fn, DT_COMM_BFLOAT16, DT_COMM_MAX)
OWN_OP_FN(bf16_min_fn, DT_COMM_BFLOAT16, DT_COMM_MIN)
OWN_OP_FN(f32_max_fn, DT_COMM_FLOAT32, DT_COMM_MAX)
OWN_OP_FN(f32_min_fn, DT_COMM_FLOAT32, DT_COMM_MIN)
OWN_OP_FN(f64_max_fn, DT_COMM_FLOAT64, DT_COMM_MAX)
OWN_OP_FN(f64_min_fn, DT_COMM_FLOAT64, DT_COMM_MIN)
/* indexed as dt_comm.own_op; NULL: MPI's own operation is used (validate.c) */
static MPI_User_function *const own_fns[DT_CX_OWN_TYPES][DT_CX_OWN_OPS] = {
    {u8_sum_fn, u8_max_fn, u8_min_fn},       {f16_sum_fn, f16_max_fn, f16_min_fn},
    {bf16_sum_fn, bf16_max_fn, bf16_min_fn}, {NULL, f32_max_fn, f32_min_fn},
    {NULL, f64_max_fn, f64_min_fn},
};

/* Our MPI operations (dt_comm.own_op), all commutative. On failure the ones made so far
 * stay in the handle for free_ops. */
static dt_status create_ops(dt_comm *c, const char *name)
{
    int err;
    for (int t = 0; t < DT_CX_OWN_TYPES; t++)
        for (int k = 0; k < DT_CX_OWN_OPS; k++)
            if (own_fns[t][k] != NULL &&
                (err = MPI_Op_create(own_fns[t][k], 1, &c->own_op[t][k])) != MPI_SUCCESS)
                return mpi_fail("MPI_Op_create", name, err);
    return DT_OK;
}

/* Cleanup of create_ops' operations, which cannot report: MPI's answers are ignored. */
static void free_ops(dt_comm *c)
{
    for (int t = 0; t < DT_CX_OWN_TYPES; t++)
        for (int k = 0; k < DT_CX_OWN_OPS; k++)
            if (c->own_op[t][k] != MPI_OP_NULL)
                MPI_Op_free(&c->own_op[t][k]);
}

/* Wraps a data communicator (already ours) into a handle with its own control duplicate.
 * On failure `data` is freed. */
static dt_status wrap(MPI_Comm data, const char *name, dt_cx_history *shared,
                      const dt_comm_options *opt, dt_comm **out)
{
    dt_status st = DT_OK;
    MPI_Comm ctrl = MPI_COMM_NULL;
    dt_comm *c = NULL;
    int rank = 0, size = 0, err;
    const char *nm = name ? name : "world";
    if ((err = MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        st = mpi_fail("MPI_Comm_set_errhandler", nm, err);
        goto fail;
    }
    if ((err = MPI_Comm_dup(data, &ctrl)) != MPI_SUCCESS) {
        st = mpi_fail("MPI_Comm_dup (control)", nm, err);
        goto fail;
    }
    if ((err = MPI_Comm_set_errhandler(ctrl, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        st = mpi_fail("MPI_Comm_set_errhandler (control)", nm, err);
        goto fail;
    }
    if ((err = MPI_Comm_rank(data, &rank)) != MPI_SUCCESS ||
        (err = MPI_Comm_size(data, &size)) != MPI_SUCCESS) {
        st = mpi_fail("MPI_Comm_rank/MPI_Comm_size", nm, err);
        goto fail;
    }
    DT_TRY(comm_new(rank, size, nm, shared, opt, &c));
    DT_TRY(create_ops(c, nm));
    c->is_mpi = 1;
    c->data = data;
    c->ctrl = ctrl;
    *out = c;
    return DT_OK;
fail:
    /* Cleanup: a communicator that cannot be freed is all MPI can say here; ignored. */
    if (c != NULL)
        free_ops(c);
    free_mem(c);
    if (ctrl != MPI_COMM_NULL)
        MPI_Comm_free(&ctrl);
    MPI_Comm_free(&data);
    return st;
}

dt_status dt_comm_create_mpi(MPI_Comm comm, const char *name, dt_comm **out)
{
    DT_ASSERT(out != NULL);
    *out = NULL;
    const char *nm = name ? name : "world";
    int init = 0, fin = 0, err;
    if ((err = MPI_Initialized(&init)) != MPI_SUCCESS)
        return mpi_fail("MPI_Initialized", nm, err);
    if ((err = MPI_Finalized(&fin)) != MPI_SUCCESS)
        return mpi_fail("MPI_Finalized", nm, err);
    if (!init || fin)
        return dt_fail(DT_ERR_INVALID,
                       "comm: MPI is %s: initialise it first, or use "
                       "dt_comm_create_self for a single process",
                       fin ? "already finalised" : "not initialised");
    if (comm == MPI_COMM_NULL)
        return dt_fail(DT_ERR_INVALID, "comm: MPI_COMM_NULL given for group '%s'", nm);
    MPI_Comm data = MPI_COMM_NULL;
    if ((err = MPI_Comm_dup(comm, &data)) != MPI_SUCCESS)
        return mpi_fail("MPI_Comm_dup", nm, err);
    return wrap(data, name, NULL, NULL, out);
}

MPI_Comm dt_comm_mpi_comm(const dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return comm->data;
}

/* Whether MPI may still write into the handle's buffers (a pending receive of ours). */
static int buffers_in_use(const dt_comm *c)
{
    for (int i = 0; i < DT_COMM_MAX_PENDING; i++)
        if (c->pool[i].state == DT_REQ_ACTIVE || c->pool[i].state == DT_REQ_ABANDONED)
            return 1;
    return 0;
}

void dt_comm_free(dt_comm *comm)
{
    if (comm == NULL)
        return;
    int busy = comm->is_mpi && buffers_in_use(comm);
    if (comm->is_mpi) {
        /* Cleanup, which cannot report: MPI's answers are ignored, and when MPI cannot say
         * whether it is finalised, it is not called again. */
        int fin = 0;
        if (MPI_Finalized(&fin) != MPI_SUCCESS)
            fin = 1;
        if (!fin) {
            /* Pending operations complete normally after MPI_Comm_free (MPI 3.1, 6.4.3). */
            MPI_Comm_free(&comm->data);
            MPI_Comm_free(&comm->ctrl);
            free_ops(comm);
        }
    }
    if (busy) {
        /* MPI may still write into our receive buffers (an abandoned operation after a
         * timeout): keep them, which is a bounded leak on a path that ends the job. */
        dt_cx_family_leave(comm);
        dt_cx_history_release(comm->hist);
        return;
    }
    free_mem(comm);
}

int dt_comm_rank(const dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return comm->rank;
}

int dt_comm_size(const dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return comm->size;
}

const char *dt_comm_name(const dt_comm *comm)
{
    DT_ASSERT(comm != NULL);
    return comm->name;
}

int dt_comm_world_rank(const dt_comm *comm, int group_rank)
{
    DT_ASSERT(comm != NULL && group_rank >= 0 && group_rank < comm->size);
    return comm->world_ranks[group_rank];
}

dt_status dt_comm_set_options(dt_comm *comm, const dt_comm_options *opt)
{
    DT_ASSERT(comm != NULL && opt != NULL);
    if ((int)opt->algorithm < 0 || opt->algorithm >= DT_COMM_ALGO_COUNT)
        return dt_fail(DT_ERR_INVALID, "comm: options.algorithm %d: must be auto, mpi or ring",
                       (int)opt->algorithm);
    if (!(opt->timeout_s > 0))
        return dt_fail(DT_ERR_INVALID,
                       "comm: options.timeout_s %g: must be > 0 seconds (INFINITY for none)",
                       opt->timeout_s);
    if (opt->chunk_bytes < 64 || opt->chunk_bytes > ((size_t)1 << 30))
        return dt_fail(DT_ERR_INVALID, "comm: options.chunk_bytes %zu: must be in [64, 1 GiB]",
                       opt->chunk_bytes);
    if (opt->direct_max_bytes > opt->chunk_bytes)
        return dt_fail(DT_ERR_INVALID,
                       "comm: options.direct_max_bytes %zu exceeds chunk_bytes %zu (a direct "
                       "message must fit one receive slot)",
                       opt->direct_max_bytes, opt->chunk_bytes);
    if (opt->deterministic != 0 && opt->deterministic != 1)
        return dt_fail(DT_ERR_INVALID, "comm: options.deterministic %d: must be 0 or 1",
                       opt->deterministic);
    if (opt->check != 0 && opt->check != 1)
        return dt_fail(DT_ERR_INVALID, "comm: options.check %d: must be 0 or 1", opt->check);
    if (align64(opt->chunk_bytes) != comm->slot_bytes) {
        if (comm->nactive > 0)
            return dt_fail(DT_ERR_INVALID,
                           "comm: group '%s': cannot change chunk_bytes while "
                           "%d requests are pending",
                           comm->name, comm->nactive);
        dt_comm_options old = comm->opt;
        comm->opt = *opt;
        dt_status st = alloc_slots(comm);
        if (st != DT_OK) {
            comm->opt = old;
            alloc_slots(comm);
            return st;
        }
        comm->stats.buffer_bytes =
            comm->slots ? DT_SLOT_GROUPS * comm->nslots * comm->slot_bytes : 0;
        for (int g = 0; g < DT_SLOT_GROUPS; g++)
            comm->stats.buffer_bytes += comm->scratch_bytes[g];
    }
    comm->opt = *opt;
    return DT_OK;
}

void dt_comm_get_options(const dt_comm *comm, dt_comm_options *out)
{
    DT_ASSERT(comm != NULL && out != NULL);
    *out = comm->opt;
}

static dt_status refail(const dt_comm *c)
{
    return dt_fail(c->fail_status, "%s", c->fail_msg);
}

/* The self-handle's split/dup: another group of one with the same history. */
static dt_status self_copy(dt_comm *c, const char *name, dt_comm **out)
{
    dt_status st = comm_new(0, 1, name, c->hist, &c->opt, out);
    if (st == DT_OK)
        (*out)->world_ranks[0] = c->world_ranks[0];
    return st;
}

/* Fills the new handle's world ranks by translating through the parent's group. */
static dt_status translate(dt_comm *parent, dt_comm *child)
{
    dt_status st = DT_OK;
    MPI_Group gp = MPI_GROUP_NULL, gc = MPI_GROUP_NULL;
    int *in = NULL, *outr = NULL;
    void *p = NULL;
    size_t n = (size_t)child->size;
    DT_TRY(dt_alloc(2 * n * sizeof(int), "comm rank translation", &p));
    in = p;
    outr = in + n;
    for (int i = 0; i < child->size; i++)
        in[i] = i;
    int err = MPI_Comm_group(parent->data, &gp);
    if (err == MPI_SUCCESS)
        err = MPI_Comm_group(child->data, &gc);
    if (err == MPI_SUCCESS)
        err = MPI_Group_translate_ranks(gc, child->size, in, gp, outr);
    if (err != MPI_SUCCESS) {
        st = mpi_fail("MPI_Group_translate_ranks", child->name, err);
        goto fail;
    }
    for (int i = 0; i < child->size; i++)
        child->world_ranks[i] = parent->world_ranks[outr[i]];
fail: /* cleanup: a group that cannot be freed changes nothing here; ignored */
    if (gp != MPI_GROUP_NULL)
        MPI_Group_free(&gp);
    if (gc != MPI_GROUP_NULL)
        MPI_Group_free(&gc);
    dt_free(in);
    return st;
}

/* MPI's communicator constructors are blocking collectives with no timeout: a rank that
 * never arrives (stopped, or stuck in its own start-up) would hang the others inside
 * MPI_Comm_split forever, silently. A watched barrier first makes every rank's arrival
 * subject to the watchdog, which names the missing ranks; once all have arrived, the
 * constructor itself completes. */
static dt_status arrival(dt_comm *comm, const char *name)
{
    dt_status st = dt_comm_barrier(comm);
    if (st != DT_OK)
        dt_error_prefix("comm: creating group '%s' from '%s': ", name ? name : comm->name,
                        comm->name);
    return st;
}

dt_status dt_comm_split(dt_comm *comm, int color, int key, const char *name, dt_comm **out)
{
    DT_ASSERT(comm != NULL && out != NULL);
    *out = NULL;
    if (comm->failed)
        return refail(comm);
    if (!comm->is_mpi)
        return color < 0 ? DT_OK : self_copy(comm, name, out);
    dt_status arrived = arrival(comm, name);
    if (arrived != DT_OK)
        return arrived;
    MPI_Comm nd = MPI_COMM_NULL;
    int err = MPI_Comm_split(comm->data, color < 0 ? MPI_UNDEFINED : color, key, &nd);
    if (err != MPI_SUCCESS)
        return mpi_fail("MPI_Comm_split", name ? name : comm->name, err);
    if (nd == MPI_COMM_NULL)
        return DT_OK;
    dt_comm *c = NULL;
    dt_status st = wrap(nd, name, comm->hist, &comm->opt, &c);
    if (st != DT_OK)
        return st;
    c->max_count = comm->max_count;
    st = translate(comm, c);
    if (st != DT_OK) {
        dt_comm_free(c);
        return st;
    }
    *out = c;
    return DT_OK;
}

dt_status dt_comm_dup(dt_comm *comm, const char *name, dt_comm **out)
{
    DT_ASSERT(comm != NULL && out != NULL);
    *out = NULL;
    if (comm->failed)
        return refail(comm);
    if (!comm->is_mpi)
        return self_copy(comm, name, out);
    dt_status arrived = arrival(comm, name);
    if (arrived != DT_OK)
        return arrived;
    MPI_Comm nd = MPI_COMM_NULL;
    int err = MPI_Comm_dup(comm->data, &nd);
    if (err != MPI_SUCCESS)
        return mpi_fail("MPI_Comm_dup", name ? name : comm->name, err);
    dt_comm *c = NULL;
    dt_status st = wrap(nd, name, comm->hist, &comm->opt, &c);
    if (st != DT_OK)
        return st;
    c->max_count = comm->max_count;
    memcpy(c->world_ranks, comm->world_ranks, (size_t)comm->size * sizeof(int));
    *out = c;
    return DT_OK;
}

dt_status dt_comm_reserve(dt_comm *comm, size_t nbytes)
{
    DT_ASSERT(comm != NULL);
    if (comm->size < 2)
        return DT_OK;
    for (int g = 0; g < DT_SLOT_GROUPS; g++) {
        if (comm->scratch_bytes[g] >= nbytes)
            continue;
        void *p = NULL;
        dt_status st = dt_alloc_large(nbytes, "comm scratch", &p);
        if (st != DT_OK)
            return st;
        comm->stats.buffer_bytes += nbytes - comm->scratch_bytes[g];
        dt_free(comm->scratch[g]);
        comm->scratch[g] = p;
        comm->scratch_bytes[g] = nbytes;
    }
    return DT_OK;
}

void dt_comm_get_stats(const dt_comm *comm, dt_comm_stats *out)
{
    DT_ASSERT(comm != NULL && out != NULL);
    *out = comm->stats;
}

void dt_comm_set_max_count_for_testing(dt_comm *comm, size_t max_count)
{
    DT_ASSERT(comm != NULL);
    comm->max_count = max_count == 0 || max_count > INT_MAX ? INT_MAX : max_count;
}
