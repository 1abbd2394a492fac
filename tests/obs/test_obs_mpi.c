/* test_obs_mpi.c — the phase report and the trace through the library, on 1-3 ranks (and so
 * under the sanitizers): with the last rank delayed, the report names it as the straggler
 * and as the slowest in the data phase, every rank gets the same report, and the trace
 * file holds every rank's steps and phases; a buffer too small for the run drops events and
 * the file says how many. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

static int rank, size;
static dt_comm *world;

static dt_trainer *run(size_t events, double delay_s)
{
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("tests/e2e/mlp_nodrop.ini"), &c));
    dt_test_set(&c, "train.threads=1");
    dt_test_set(&c, "train.max_steps=4");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    if (events > 0)
        DT_ASSERT_OK(dt_trainer_enable_trace(t, events));
    if (rank == size - 1)
        dt_trainer_set_delay(t, delay_s);
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    return t;
}

static void test_straggler_named(void **state)
{
    (void)state;
    dt_trainer *t = run(0, 0.02);
    dt_phase_report r;
    DT_ASSERT_OK(dt_trainer_phase_report(t, &r));
    assert_int_equal(r.ranks, size);
    assert_int_equal(r.steps, 4);
    if (size > 1 && (r.straggler != size - 1 || r.slowest[DT_PHASE_DATA] != size - 1)) {
        fprintf(stderr, "straggler %d, slowest in data %d, expected rank %d\n", r.straggler,
                r.slowest[DT_PHASE_DATA], size - 1);
        fail();
    }
    /* The delay is counted in the data phase: at least 20 ms per step on that rank. */
    assert_true(r.max_s[DT_PHASE_DATA] >= 0.02);
    assert_true(r.mean_s[DT_PHASE_FORWARD] > 0 && r.mean_s[DT_PHASE_BUBBLE] == 0);
    int straggler = r.straggler, all = 0;
    MPI_Allreduce(&straggler, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    assert_int_equal(all, straggler); /* the same report on every rank */
    dt_trainer_free(t);
}

/* Rank 0: the trace's events per rank, and its dropped count. */
static void read_trace(const char *path, int *per_rank, double *dropped)
{
    char *text = NULL;
    size_t n = 0;
    DT_ASSERT_OK(dt_read_file(path, "test", &text, &n));
    cJSON *o = cJSON_ParseWithLength(text, n);
    assert_non_null(o);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "traceEvents"), *e = NULL;
    cJSON_ArrayForEach(e, ev)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        if (cJSON_IsString(ph) && strcmp(ph->valuestring, "X") == 0 && cJSON_IsNumber(pid) &&
            pid->valueint >= 0 && pid->valueint < 8)
            per_rank[pid->valueint]++;
    }
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(o, "otherData");
    *dropped = cJSON_GetObjectItemCaseSensitive(other, "dropped_events")->valuedouble;
    cJSON_Delete(o);
    free(text);
}

static void trace_case(size_t events, int expect_dropped)
{
    char path[320];
    if (rank == 0)
        snprintf(path, sizeof path, "%s/trace-%zu.json", dt_test_tmpdir(), events);
    MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    dt_trainer *t = run(events, 0.0);
    DT_ASSERT_OK(dt_trainer_write_trace(t, path));
    if (rank == 0) {
        int per_rank[8] = {0};
        double dropped = -1;
        read_trace(path, per_rank, &dropped);
        for (int r = 0; r < size; r++)
            if (per_rank[r] < (expect_dropped ? (int)events : 4 * 5)) {
                fprintf(stderr, "rank %d has %d events in the trace\n", r, per_rank[r]);
                fail();
            }
        assert_true(expect_dropped ? dropped > 0 : dropped == 0);
    }
    dt_trainer_free(t);
}

static void test_trace_all_ranks(void **state)
{
    (void)state;
    trace_case(4096, 0);
}

static void test_trace_full_buffer(void **state)
{
    (void)state;
    trace_case(6, 1);
    if (rank == 0) { /* the last test: the scratch directory goes */
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dt_test_tmpdir());
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dt_test_tmpdir());
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straggler_named),
        cmocka_unit_test(test_trace_all_ranks),
        cmocka_unit_test(test_trace_full_buffer),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
