/* test_fed_average.c — FedAvg's average is weighted by the clients' sample counts: a case
 * worked by hand. From the global model (0, 0, 1), client A (3 samples) ends at (1, 2, 1) and
 * client B (1 sample) at (5, 6, 3):
 *     weighted:   (0, 0, 1) + (3 (1, 2, 0) + 1 (5, 6, 2)) / 4 = (2, 3, 1.5)
 *     unweighted: the plain mean of the models would be (3, 4, 2).
 * The values are exact in float, so the comparison is exact. */
#include "dt_test.h"

#include "parallel/strategy.h"

static void test_weighted_by_samples(void **state)
{
    (void)state;
    const float global[3] = {0.0f, 0.0f, 1.0f};
    const float a[3] = {1.0f, 2.0f, 1.0f}, b[3] = {5.0f, 6.0f, 3.0f};
    float slots[6], out[3];
    for (int i = 0; i < 3; i++)
        slots[i] = a[i] - global[i], slots[3 + i] = b[i] - global[i];
    dt_fed_weigh(slots, 3, 3);
    dt_fed_weigh(slots + 3, 1, 3);
    const float want_slots[6] = {3.0f, 6.0f, 0.0f, 5.0f, 6.0f, 2.0f};
    for (int i = 0; i < 6; i++)
        if (slots[i] != want_slots[i])
            fail_msg("slot element %d: expected %g, got %g", i, want_slots[i], slots[i]);
    dt_fed_average(global, slots, 2, 3, 4.0, out);
    const float want[3] = {2.0f, 3.0f, 1.5f};
    for (int i = 0; i < 3; i++)
        if (out[i] != want[i])
            fail_msg("weighted average element %d: expected %g, got %g (the unweighted mean "
                     "would give %g)",
                     i, want[i], out[i], (a[i] + b[i]) / 2);
}

/* One client: the model it ended with, whatever its size. */
static void test_one_client_is_its_model(void **state)
{
    (void)state;
    const float global[2] = {0.5f, -1.0f}, c[2] = {0.75f, 2.0f};
    float slot[2], out[2];
    for (int i = 0; i < 2; i++)
        slot[i] = c[i] - global[i];
    dt_fed_weigh(slot, 7, 2);
    dt_fed_average(global, slot, 1, 2, 7.0, out);
    for (int i = 0; i < 2; i++)
        if (out[i] != c[i])
            fail_msg("element %d: expected the client's %g, got %g", i, c[i], out[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weighted_by_samples),
        cmocka_unit_test(test_one_client_is_its_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
