/* test_obs.c — the recorder (obs.h): phase totals add up, events keep their fields and
 * order, a full buffer drops and counts instead of growing, a recorder without a buffer
 * keeps totals only, NULL is a recorder that does nothing, and each phase has its own name
 * (the report's rows, the metrics' keys and the trace's spans are named by it). */
#include "dt_test.h"

#include <string.h>

#include "dtrain/obs.h"

static void test_totals_and_events(void **state)
{
    (void)state;
    dt_obs *o = NULL;
    DT_ASSERT_OK(dt_obs_create(4, &o));
    dt_obs_set_step(o, 7);
    dt_obs_phase(o, DT_PHASE_FORWARD, 1.0, 1.5, 2);
    dt_obs_phase(o, DT_PHASE_FORWARD, 2.0, 2.25, 3);
    dt_obs_coll(o, "allreduce", "a-group-name-longer-than-its-field", "ring", 4096, 3.0, 3.125);
    dt_obs_step(o, 0.5, 4.0);
    dt_obs_phase(o, DT_PHASE_OPTIM, 4.0, 4.5, -1); /* the fifth: dropped, still counted */
    assert_true(dt_obs_total(o, DT_PHASE_FORWARD) == 0.75);
    assert_true(dt_obs_total(o, DT_PHASE_OPTIM) == 0.5);
    assert_true(dt_obs_inflight(o) == 0.125);
    assert_int_equal(dt_obs_count(o), 4);
    assert_int_equal(dt_obs_dropped(o), 1);
    const dt_obs_event *e = dt_obs_get(o, 1);
    assert_int_equal(e->kind, DT_OBS_PHASE);
    assert_int_equal(e->what, DT_PHASE_FORWARD);
    assert_int_equal(e->micro, 3);
    assert_int_equal(e->step, 7);
    e = dt_obs_get(o, 2);
    assert_int_equal(e->kind, DT_OBS_COLL);
    assert_string_equal(e->name, "allreduce");
    assert_string_equal(e->algo, "ring");
    assert_int_equal(e->bytes, 4096);
    assert_int_equal(strlen(e->group), sizeof e->group - 1); /* cut, and terminated */
    assert_int_equal(dt_obs_get(o, 3)->kind, DT_OBS_STEP);
    dt_obs_free(o);
}

/* Operations in flight together count once: the union of their spans, whatever order they
 * end in; a step's end starts a new union. */
static void test_inflight_union(void **state)
{
    (void)state;
    dt_obs *o = NULL;
    DT_ASSERT_OK(dt_obs_create(0, &o));
    dt_obs_coll(o, "allreduce", "dp", "ring", 64, 2.0, 5.0); /* ends first, inside the next */
    dt_obs_coll(o, "allreduce", "dp", "mpi", 64, 0.0, 10.0); /* [0, 10] */
    assert_true(dt_obs_inflight(o) == 10.0);
    dt_obs_coll(o, "allgather", "dp", "direct", 8, 8.0, 12.0); /* 2 more */
    dt_obs_coll(o, "bcast", "dp", "mpi", 8, 20.0, 21.0);       /* 1 more, apart */
    dt_obs_coll(o, "bcast", "dp", "mpi", 8, 11.0, 20.5);       /* joins both: 8 more */
    assert_true(dt_obs_inflight(o) == 21.0);
    dt_obs_step(o, 0.0, 22.0);
    dt_obs_coll(o, "allreduce", "dp", "ring", 64, 21.0, 23.0); /* another step: counted whole */
    assert_true(dt_obs_inflight(o) == 23.0);
    dt_obs_free(o);
}

static void test_totals_only_and_null(void **state)
{
    (void)state;
    dt_obs *o = NULL;
    DT_ASSERT_OK(dt_obs_create(0, &o));
    dt_obs_phase(o, DT_PHASE_BUBBLE, 0.0, 2.0, -1);
    assert_true(dt_obs_total(o, DT_PHASE_BUBBLE) == 2.0);
    assert_int_equal(dt_obs_count(o), 0);
    assert_int_equal(dt_obs_dropped(o), 0); /* no buffer asked for: nothing dropped */
    dt_obs_free(o);
    dt_obs_phase(NULL, DT_PHASE_DATA, 0.0, 1.0, 0);
    dt_obs_coll(NULL, "bcast", "dp", "mpi", 8, 0.0, 1.0);
    assert_true(dt_obs_total(NULL, DT_PHASE_DATA) == 0.0);
    for (int p = 0; p < DT_PHASE_COUNT; p++)
        assert_non_null(dt_phase_name((dt_phase)p));
    assert_null(dt_phase_name(DT_PHASE_COUNT));
}

/* Each phase's name, as obs.h lists them: a swapped pair would label forward's time as
 * backward's in every report. */
static void test_phase_names(void **state)
{
    (void)state;
    const struct {
        dt_phase p;
        const char *name;
    } want[] = {{DT_PHASE_DATA, "data"},         {DT_PHASE_FORWARD, "forward"},
                {DT_PHASE_BACKWARD, "backward"}, {DT_PHASE_COMM, "comm"},
                {DT_PHASE_OPTIM, "optimizer"},   {DT_PHASE_BUBBLE, "bubble"}};
    assert_int_equal(sizeof want / sizeof want[0], DT_PHASE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *got = dt_phase_name(want[i].p);
        if (got == NULL || strcmp(got, want[i].name) != 0)
            fail_msg("dt_phase_name(%d): expected \"%s\", got \"%s\"", (int)want[i].p, want[i].name,
                     got ? got : "(null)");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_totals_and_events),
        cmocka_unit_test(test_inflight_union),
        cmocka_unit_test(test_totals_only_and_null),
        cmocka_unit_test(test_phase_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
