/* grid.c — the dp x tp x pp process grid in Megatron-LM's default order,
 *     rank = tp_rank + T * (dp_rank + D * pp_rank),
 * so that tensor-parallel partners are neighbouring ranks (on one node, when nodes hold
 * consecutive ranks). Each axis's group holds the ranks that differ only along it. The
 * layout is checked against the world size before anything is sent: every rank computes
 * the same verdict from the same numbers, so a bad layout fails everywhere, never hangs. */
#include <stdio.h>

#include "comm/comm_internal.h"

struct dt_grid {
    dt_comm *world;               /* borrowed */
    int size[DT_GRID_AXIS_COUNT]; /* D, T, P */
    int rank[DT_GRID_AXIS_COUNT]; /* this rank's coordinates */
    dt_comm *group[DT_GRID_AXIS_COUNT];
};

const char *dt_grid_axis_name(dt_grid_axis axis)
{
    static const char *const names[DT_GRID_AXIS_COUNT] = {"dp", "tp", "pp"};
    return (int)axis >= 0 && axis < DT_GRID_AXIS_COUNT ? names[axis] : "?";
}

dt_status dt_grid_create(dt_comm *world, int dp, int tp, int pp, dt_grid **out)
{
    DT_ASSERT(world != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_grid *g = NULL;
    void *p = NULL;
    int n = dt_comm_size(world), r = dt_comm_rank(world);
    *out = NULL;
    if (dp < 0 || tp < 0 || pp < 0)
        return dt_fail(DT_ERR_INVALID,
                       "comm: grid: dp %d, tp %d, pp %d: sizes must be >= 0 "
                       "(0 derives one)",
                       dp, tp, pp);
    int T = tp ? tp : 1, P = pp ? pp : 1;
    if (dp == 0 && n % (T * P) != 0)
        return dt_fail(DT_ERR_INVALID,
                       "comm: grid: tp %d x pp %d = %d does not divide the %d "
                       "ranks, so dp cannot be derived",
                       T, P, T * P, n);
    int D = dp ? dp : n / (T * P);
    if ((long long)D * T * P != n)
        return dt_fail(DT_ERR_INVALID,
                       "comm: grid: dp %d x tp %d x pp %d = %lld ranks, but the "
                       "world has %d: the product must equal the world size",
                       D, T, P, (long long)D * T * P, n);
    DT_TRY(dt_alloc(sizeof *g, "comm grid", &p));
    g = p;
    g->world = world;
    g->size[DT_GRID_DP] = D;
    g->size[DT_GRID_TP] = T;
    g->size[DT_GRID_PP] = P;
    g->rank[DT_GRID_TP] = r % T;
    g->rank[DT_GRID_DP] = (r / T) % D;
    g->rank[DT_GRID_PP] = r / (T * D);
    int t = g->rank[DT_GRID_TP], d = g->rank[DT_GRID_DP], q = g->rank[DT_GRID_PP];
    /* color = the coordinates that stay fixed within the group; key = the varying one. */
    DT_TRY(dt_comm_split(world, t + T * q, d, "dp", &g->group[DT_GRID_DP]));
    DT_TRY(dt_comm_split(world, d + D * q, t, "tp", &g->group[DT_GRID_TP]));
    DT_TRY(dt_comm_split(world, t + T * d, q, "pp", &g->group[DT_GRID_PP]));
    *out = g;
    return DT_OK;
fail:
    dt_grid_free(g);
    return st;
}

void dt_grid_free(dt_grid *grid)
{
    if (grid == NULL)
        return;
    for (int a = 0; a < DT_GRID_AXIS_COUNT; a++)
        dt_comm_free(grid->group[a]);
    dt_free(grid);
}

int dt_grid_size(const dt_grid *grid, dt_grid_axis axis)
{
    DT_ASSERT(grid != NULL && (int)axis >= 0 && axis < DT_GRID_AXIS_COUNT);
    return grid->size[axis];
}

int dt_grid_rank(const dt_grid *grid, dt_grid_axis axis)
{
    DT_ASSERT(grid != NULL && (int)axis >= 0 && axis < DT_GRID_AXIS_COUNT);
    return grid->rank[axis];
}

dt_comm *dt_grid_comm(const dt_grid *grid, dt_grid_axis axis)
{
    DT_ASSERT(grid != NULL && (int)axis >= 0 && axis < DT_GRID_AXIS_COUNT);
    return grid->group[axis];
}

dt_comm *dt_grid_world(const dt_grid *grid)
{
    DT_ASSERT(grid != NULL);
    return grid->world;
}

int dt_grid_world_rank(const dt_grid *grid, int dp_rank, int tp_rank, int pp_rank)
{
    DT_ASSERT(grid != NULL);
    int D = grid->size[DT_GRID_DP], T = grid->size[DT_GRID_TP], P = grid->size[DT_GRID_PP];
    DT_ASSERT(dp_rank >= 0 && dp_rank < D && tp_rank >= 0 && tp_rank < T && pp_rank >= 0 &&
              pp_rank < P);
    return tp_rank + T * (dp_rank + D * pp_rank);
}
