/* validate.c — names, MPI mappings and the checks every call passes before MPI sees it;
 * MPI's errors turned into statuses.
 *
 * MPI aborts the job on aliased buffers and takes int counts, so the layer refuses what
 * MPI would choke on: unknown types and operations, a root or peer outside the group,
 * sizes that overflow, NULL buffers with data, and any overlap of send and receive buffers
 * other than MPI_IN_PLACE's meaning for the collective. The same pass fills the request's
 * per-rank block layout (offsets and lengths in elements), which every algorithm uses. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

static const char *const coll_names[DT_COMM_COLL_COUNT] = {
    [DT_COMM_ALLREDUCE] = "allreduce", [DT_COMM_REDUCE_SCATTER] = "reduce_scatter",
    [DT_COMM_ALLGATHER] = "allgather", [DT_COMM_BCAST] = "bcast",
    [DT_COMM_REDUCE] = "reduce",       [DT_COMM_BARRIER] = "barrier",
    [DT_COMM_SEND] = "send",           [DT_COMM_RECV] = "recv",
};
static const char *const dtype_names[DT_COMM_DTYPE_COUNT] = {
    [DT_COMM_FLOAT32] = "float32",   [DT_COMM_FLOAT64] = "float64", [DT_COMM_INT32] = "int32",
    [DT_COMM_INT64] = "int64",       [DT_COMM_UINT8] = "uint8",     [DT_COMM_FLOAT16] = "float16",
    [DT_COMM_BFLOAT16] = "bfloat16",
};
static const size_t dtype_sizes[DT_COMM_DTYPE_COUNT] = {
    [DT_COMM_FLOAT32] = 4, [DT_COMM_FLOAT64] = 8, [DT_COMM_INT32] = 4,    [DT_COMM_INT64] = 8,
    [DT_COMM_UINT8] = 1,   [DT_COMM_FLOAT16] = 2, [DT_COMM_BFLOAT16] = 2,
};
static const char *const redop_names[DT_COMM_REDOP_COUNT] = {"sum", "avg", "max", "min"};
static const char *const algo_names[DT_COMM_ALGO_COUNT] = {"auto", "mpi", "ring"};

const char *dt_comm_coll_name(dt_comm_coll coll)
{
    return (int)coll >= 0 && coll < DT_COMM_COLL_COUNT ? coll_names[coll] : "?";
}
const char *dt_comm_dtype_name(dt_comm_dtype dtype)
{
    return (int)dtype >= 0 && dtype < DT_COMM_DTYPE_COUNT ? dtype_names[dtype] : "?";
}
const char *dt_comm_redop_name(dt_comm_redop op)
{
    return (int)op >= 0 && op < DT_COMM_REDOP_COUNT ? redop_names[op] : "?";
}
const char *dt_comm_algo_name(dt_comm_algo algo)
{
    if (algo == DT_COMM_ALGO_DEFAULT)
        return "default";
    return (int)algo >= 0 && algo < DT_COMM_ALGO_COUNT ? algo_names[algo] : "?";
}
size_t dt_comm_dtype_size(dt_comm_dtype dtype)
{
    return (int)dtype >= 0 && dtype < DT_COMM_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

dt_status dt_comm_algo_parse(const char *text, dt_comm_algo *out)
{
    DT_ASSERT(text != NULL && out != NULL);
    for (int i = 0; i < DT_COMM_ALGO_COUNT; i++)
        if (strcmp(text, algo_names[i]) == 0) {
            *out = (dt_comm_algo)i;
            return DT_OK;
        }
    return dt_fail(DT_ERR_INVALID, "comm: unknown algorithm '%s' (auto, mpi or ring)", text);
}

MPI_Datatype dt_cx_mpi_type(dt_comm_dtype dtype)
{
    switch (dtype) {
    case DT_COMM_FLOAT32:
        return MPI_FLOAT;
    case DT_COMM_FLOAT64:
        return MPI_DOUBLE;
    case DT_COMM_INT32:
        return MPI_INT32_T;
    case DT_COMM_INT64:
        return MPI_INT64_T;
    /* MPI_UINT8_T, not MPI_BYTE: MPI_BYTE only takes bitwise operations. */
    case DT_COMM_UINT8:
        return MPI_UINT8_T;
    /* MPI has no 16-bit float type: the bits travel as 2-byte integers, and every
     * reduction of them is one of our own operations (dt_cx_mpi_op). */
    case DT_COMM_FLOAT16:
    case DT_COMM_BFLOAT16:
        return MPI_UINT16_T;
    default:
        return MPI_DATATYPE_NULL;
    }
}

MPI_Op dt_cx_mpi_op(const dt_comm *c, dt_comm_dtype dtype, dt_comm_redop op)
{
    /* Open MPI 4.1's AVX operations saturate uint8 sums at 255 (measured: 200 + 200 gave
     * 255 in 64-element calls and 144 in 1-element ones), and MPICH 4.0's max and min
     * compare unsigned types as signed (max(100, 200) gave 100; MPICH issue 6083, fixed
     * after the 4.0.2 Debian 12 ships); MPI has no 16-bit float type; and both MPIs' max
     * and min of float32 and float64 drop a NaN that comm.h keeps, on one rank or the other
     * (docs/NOTES.md). Our own operations for these. */
    const int minmax = op == DT_COMM_MAX || op == DT_COMM_MIN;
    const int own = dtype == DT_COMM_UINT8               ? DT_CX_OWN_U8
                    : dtype == DT_COMM_FLOAT16           ? DT_CX_OWN_F16
                    : dtype == DT_COMM_BFLOAT16          ? DT_CX_OWN_BF16
                    : dtype == DT_COMM_FLOAT32 && minmax ? DT_CX_OWN_F32
                    : dtype == DT_COMM_FLOAT64 && minmax ? DT_CX_OWN_F64
                                                         : -1;
    /* MPI has no average: sum, then divide once */
    const int k = op == DT_COMM_SUM || op == DT_COMM_AVG ? DT_CX_OWN_SUM
                  : op == DT_COMM_MAX                    ? DT_CX_OWN_MAX
                  : op == DT_COMM_MIN                    ? DT_CX_OWN_MIN
                                                         : -1;
    if (k < 0)
        return MPI_OP_NULL;
    if (own >= 0)
        return c->own_op[own][k];
    static const MPI_Op mpi_ops[DT_CX_OWN_OPS] = {MPI_SUM, MPI_MAX, MPI_MIN};
    return mpi_ops[k];
}

void dt_cx_describe(const dt_comm_req *q, char *buf, size_t n)
{
    const dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    if (q->is_coll)
        snprintf(buf, n, "comm: %s #%llu (%zu %s) on group '%s' (%d ranks)",
                 dt_comm_coll_name(a->coll), (unsigned long long)q->seq, q->total,
                 dt_comm_dtype_name(a->dtype), c->name, c->size);
    else
        snprintf(buf, n, "comm: %s of %zu %s %s rank %d (world %d), tag %d, on group '%s'",
                 dt_comm_coll_name(a->coll), q->total, dt_comm_dtype_name(a->dtype),
                 a->coll == DT_COMM_SEND ? "to" : "from", a->peer, dt_comm_world_rank(c, a->peer),
                 a->tag, c->name);
}

void dt_cx_mpi_error_string(int err, char *buf, size_t n)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", err);
    snprintf(buf, n, "%s", msg);
}

dt_status dt_cx_mpi_fail(const dt_comm_req *q, const char *call, int err)
{
    char what[256], msg[MPI_MAX_ERROR_STRING];
    dt_cx_mpi_error_string(err, msg, sizeof msg);
    dt_cx_describe(q, what, sizeof what);
    return dt_fail(DT_ERR_MPI, "%s: %s: %s", what, call, msg);
}

dt_status dt_cx_group_mpi_fail(const char *group, const char *what, int err)
{
    char msg[MPI_MAX_ERROR_STRING];
    dt_cx_mpi_error_string(err, msg, sizeof msg);
    return dt_fail(DT_ERR_MPI, "comm: group '%s': %s: %s", group, what, msg);
}

/* [a, a+na) and [b, b+nb) share a byte. */
static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    if (na == 0 || nb == 0)
        return 0;
    return pa < pb + nb && pb < pa + na;
}

static dt_status bad(const dt_comm_req *q, const char *fmt, const char *detail)
{
    return dt_fail(DT_ERR_INVALID, "comm: %s on group '%s': %s%s", dt_comm_coll_name(q->a.coll),
                   q->comm->name, fmt, detail ? detail : "");
}

/* Equal blocks of `count` each, or counts[] with displs[] (or packed). Fills boff/blen and
 * the extent (elements from the first block's start to the last block's end). */
static dt_status layout_blocks(dt_comm_req *q, size_t *extent)
{
    dt_comm *c = q->comm;
    const dt_comm_args *a = &q->a;
    size_t sum = 0, ext = 0;
    for (int b = 0; b < c->size; b++) {
        size_t len = a->counts ? a->counts[b] : a->count;
        size_t off = a->displs ? a->displs[b] : sum;
        if (len > SIZE_MAX - sum || len > SIZE_MAX - off)
            return bad(q, "block sizes overflow size_t", NULL);
        q->boff[b] = off;
        q->blen[b] = len;
        sum += len;
        if (off + len > ext)
            ext = off + len;
    }
    if (a->displs) /* v-blocks placed by the caller must not overlap each other */
        for (int b = 0; b < c->size; b++)
            for (int d = b + 1; d < c->size; d++)
                if (q->blen[b] && q->blen[d] && q->boff[b] < q->boff[d] + q->blen[d] &&
                    q->boff[d] < q->boff[b] + q->blen[b]) {
                    char m[128];
                    snprintf(m, sizeof m, "blocks of ranks %d and %d overlap in recvbuf", b, d);
                    return bad(q, m, NULL);
                }
    q->total = sum;
    *extent = ext;
    return DT_OK;
}

/* The near-equal split of `total` elements the reductions use: the first total % N blocks
 * take one extra element (any count works, also one smaller than the group). */
static void layout_split(dt_comm_req *q)
{
    int n = q->comm->size;
    size_t base = q->total / (size_t)n, rem = q->total % (size_t)n;
    for (int b = 0; b < n; b++) {
        q->blen[b] = base + ((size_t)b < rem);
        q->boff[b] = base * (size_t)b + ((size_t)b < rem ? (size_t)b : rem);
    }
}

/* The arguments alone: a known operation, algorithm, element type and reduction; root,
 * peer and tag in range. Sets the request's element size and whether it is a collective;
 * a barrier needs nothing more (*done = 1). */
static dt_status check_args(dt_comm *c, dt_comm_req *q, int *done)
{
    *done = 0;
    dt_comm_args *a = &q->a;
    if ((int)a->coll < 0 || a->coll >= DT_COMM_COLL_COUNT)
        return dt_fail(DT_ERR_INVALID, "comm: unknown operation %d on group '%s'", (int)a->coll,
                       c->name);
    if (a->algo != DT_COMM_ALGO_DEFAULT && ((int)a->algo < 0 || a->algo >= DT_COMM_ALGO_COUNT))
        return bad(q, "unknown algorithm", NULL);
    q->is_coll = a->coll != DT_COMM_SEND && a->coll != DT_COMM_RECV;
    if (a->coll == DT_COMM_BARRIER) {
        a->dtype = DT_COMM_UINT8;
        q->esize = 1;
        q->total = q->nbytes = 0;
        q->in_place = 0;
        *done = 1;
        return DT_OK;
    }
    q->esize = dt_comm_dtype_size(a->dtype);
    if (q->esize == 0) {
        char m[64];
        snprintf(m, sizeof m, "unknown element type %d", (int)a->dtype);
        return bad(q, m, NULL);
    }
    int reduction = a->coll == DT_COMM_ALLREDUCE || a->coll == DT_COMM_REDUCE_SCATTER ||
                    a->coll == DT_COMM_REDUCE;
    if (reduction && ((int)a->op < 0 || a->op >= DT_COMM_REDOP_COUNT)) {
        char m[64];
        snprintf(m, sizeof m, "unknown reduction operation %d", (int)a->op);
        return bad(q, m, NULL);
    }
    if ((a->coll == DT_COMM_BCAST || a->coll == DT_COMM_REDUCE) &&
        (a->root < 0 || a->root >= c->size)) {
        char m[96];
        snprintf(m, sizeof m, "root %d outside the group of %d ranks", a->root, c->size);
        return bad(q, m, NULL);
    }
    if (!q->is_coll) {
        char m[96];
        if (a->peer < 0 || a->peer >= c->size) {
            snprintf(m, sizeof m, "peer %d outside the group of %d ranks", a->peer, c->size);
            return bad(q, m, NULL);
        }
        if (a->tag < 0 || a->tag >= DT_COMM_TAG_MAX) {
            snprintf(m, sizeof m, "tag %d outside [0, %d)", a->tag, DT_COMM_TAG_MAX);
            return bad(q, m, NULL);
        }
    }
    return DT_OK;
}

/* The element layout: q->total and the blocks (all-gather, reduce-scatter), *extent the
 * elements of the gathered result; byte counts checked against size_t. */
static dt_status plan_layout(dt_comm_req *q, size_t *extent)
{
    dt_comm_args *a = &q->a;
    const size_t es = q->esize;
    *extent = 0;
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
        q->total = a->count;
        layout_split(q);
        break;
    case DT_COMM_REDUCE_SCATTER:
        if (a->displs)
            return bad(q, "reduce-scatter takes counts, not displacements", NULL);
        /* fall through */
    case DT_COMM_ALLGATHER: {
        dt_status st = layout_blocks(q, extent);
        if (st != DT_OK)
            return st;
        break;
    }
    default:
        q->total = a->count;
        break;
    }
    if (q->total > SIZE_MAX / es || *extent > SIZE_MAX / es)
        return bad(q, "count overflows size_t bytes", NULL);
    q->nbytes = q->total * es;
    return DT_OK;
}

/* Bytes this rank reads from sendbuf and writes to recvbuf; NULL is fine only where no
 * byte is read or written (recvbuf is not significant away from a reduce's root). */
static dt_status check_buffers(dt_comm *c, dt_comm_req *q, size_t extent, size_t *in_bytes,
                               size_t *out_bytes)
{
    dt_comm_args *a = &q->a;
    const size_t es = q->esize;
    const int root_here = a->root == c->rank;
    *in_bytes = *out_bytes = 0;
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
        *in_bytes = *out_bytes = q->nbytes;
        break;
    case DT_COMM_REDUCE:
        *in_bytes = q->nbytes;
        *out_bytes = root_here ? q->nbytes : 0;
        if (!root_here)
            a->recvbuf = NULL;
        break;
    case DT_COMM_REDUCE_SCATTER:
        *in_bytes = q->nbytes;
        *out_bytes = q->blen[c->rank] * es;
        break;
    case DT_COMM_ALLGATHER:
        *in_bytes = q->blen[c->rank] * es;
        *out_bytes = extent * es;
        break;
    default: /* bcast, send, recv: one buffer, passed as recvbuf */
        *out_bytes = q->nbytes;
        break;
    }
    if ((*in_bytes && a->sendbuf == NULL) || (*out_bytes && a->recvbuf == NULL))
        return bad(q, "NULL buffer with a non-zero count", NULL);
    return DT_OK;
}

/* In place is each collective's MPI_IN_PLACE meaning; any other overlap is refused. */
static dt_status check_in_place(dt_comm *c, dt_comm_req *q, size_t in_bytes, size_t out_bytes)
{
    const dt_comm_args *a = &q->a;
    const size_t es = q->esize;
    const char *sb = a->sendbuf;
    const char *rb = a->recvbuf;
    char m[200];
    q->in_place = 0;
    switch (a->coll) {
    case DT_COMM_ALLREDUCE:
    case DT_COMM_REDUCE:
        if (sb == rb && out_bytes) {
            q->in_place = 1;
        } else if (overlap(sb, in_bytes, rb, out_bytes)) {
            return bad(q,
                       "sendbuf and recvbuf overlap; only sendbuf == recvbuf (in place) "
                       "is allowed",
                       NULL);
        }
        break;
    case DT_COMM_REDUCE_SCATTER:
        if (rb == sb || (sb && rb == sb + q->boff[c->rank] * es)) {
            q->in_place = 1;
        } else if (overlap(sb, in_bytes, rb, out_bytes)) {
            snprintf(m, sizeof m,
                     "sendbuf and recvbuf overlap; in place means recvbuf == "
                     "sendbuf or recvbuf == sendbuf + %zu elements (rank %d's "
                     "block)",
                     q->boff[c->rank], c->rank);
            return bad(q, m, NULL);
        }
        break;
    case DT_COMM_ALLGATHER:
        if (rb && sb == rb + q->boff[c->rank] * es) {
            q->in_place = 1;
        } else if (overlap(sb, in_bytes, rb, out_bytes)) {
            snprintf(m, sizeof m,
                     "sendbuf and recvbuf overlap; in place means sendbuf == "
                     "recvbuf + %zu elements (rank %d's block)",
                     q->boff[c->rank], c->rank);
            return bad(q, m, NULL);
        }
        break;
    default:
        break;
    }
    return DT_OK;
}

dt_status dt_cx_validate(dt_comm *c, dt_comm_req *q)
{
    int done = 0;
    size_t extent = 0, in_bytes = 0, out_bytes = 0;
    dt_status st = check_args(c, q, &done);
    if (st != DT_OK || done)
        return st;
    if ((st = plan_layout(q, &extent)) != DT_OK)
        return st;
    if ((st = check_buffers(c, q, extent, &in_bytes, &out_bytes)) != DT_OK)
        return st;
    return check_in_place(c, q, in_bytes, out_bytes);
}
