/* test_ref_schedule.c — dt_schedule_lr against the learning rates of
 * tests/ref/schedule.safetensors: gen_refs.py computes them with optim.h's formulas and
 * checks them there against torch.optim.lr_scheduler (StepLR, CosineAnnealingLR, LinearLR
 * chained by SequentialLR) wherever PyTorch has an equivalent. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_util.h"

typedef struct sched_case {
    const char *name;
    dt_schedule s;
    int64_t steps;
} sched_case;

static void test_schedules(void **state)
{
    (void)state;
    const sched_case cases[] = {
        {"const", ru_sched(DT_SCHED_CONSTANT, 0.1, 0, 0.0, 1, 0.1, 1, 0.0), 5},
        {"step", ru_sched(DT_SCHED_STEP, 0.5, 0, 0.0, 3, 0.5, 1, 0.0), 10},
        {"step_warm", ru_sched(DT_SCHED_STEP, 0.2, 4, 0.25, 2, 0.3, 1, 0.0), 12},
        {"step_warm0", ru_sched(DT_SCHED_STEP, 0.2, 3, 0.0, 2, 0.5, 1, 0.0), 9},
        {"cos", ru_sched(DT_SCHED_COSINE, 0.1, 0, 0.0, 1, 0.1, 8, 0.001), 9},
        {"cos_warm", ru_sched(DT_SCHED_COSINE, 1e-3, 5, 0.1, 1, 0.1, 10, 1e-5), 16},
        /* Past total_steps the rate rests at min_lr, its "final learning rate". */
        {"cos_past", ru_sched(DT_SCHED_COSINE, 0.05, 2, 0.0, 1, 0.1, 4, 0.0), 10},
    };
    dt_st_file *f = ru_open("schedule.safetensors");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const sched_case *sc = &cases[c];
        char desc[256], label[160];
        ru_sched_desc(&sc->s, desc, sizeof desc);
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " steps=%lld",
                 (long long)sc->steps);
        ru_check_meta(f, sc->name, desc);
        DT_ASSERT_OK(dt_schedule_check(&sc->s));
        double *want = ru_f64(ru_tensor(f, sc->name, "lr", DT_ST_F64, 1, &sc->steps));
        double *got = calloc((size_t)sc->steps, sizeof(double));
        assert_non_null(got);
        for (int64_t i = 0; i < sc->steps; i++)
            got[i] = dt_schedule_lr(&sc->s, i);
        /* Both sides evaluate the same closed form in double: pow and cos differ in the
         * last bits at most. */
        snprintf(label, sizeof label, "schedule %s: lr per step", sc->name);
        DT_ASSERT_CLOSE_D(label, got, want, (size_t)sc->steps, 1e-15, 1e-12);
        free(want);
        free(got);
    }
    dt_st_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
