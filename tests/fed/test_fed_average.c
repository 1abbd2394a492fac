/* test_fed_average.c — FedAvg's average is weighted by the clients' sample counts: a case
 * worked by hand. From the global model (0, 0, 1), client A (3 samples) ends at (1, 2, 1) and
 * client B (1 sample) at (5, 6, 3):
 *     weighted:   (0, 0, 1) + (3 (1, 2, 0) + 1 (5, 6, 2)) / 4 = (2, 3, 1.5)
 *     unweighted: the plain mean of the models would be (3, 4, 2).
 * The values are exact in float, so the comparison is exact. A round weighs slot j by the
 * client it sampled for that slot: with clients {1, 3} of 4 (3 and 4 samples of 2, 3, 1, 4)
 * the weights are 3 and 4, not clients 0 and 1's 2 and 3. */
#include <math.h>

#include "dt_test.h"

#include "parallel/strategy_impl.h"

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
    dt_fed_average(global, slots, 2, 3, 4.0, NULL, out);
    const float want[3] = {2.0f, 3.0f, 1.5f};
    for (int i = 0; i < 3; i++)
        if (out[i] != want[i])
            fail_msg("weighted average element %d: expected %g, got %g (the unweighted mean "
                     "would give %g)",
                     i, want[i], out[i], (a[i] + b[i]) / 2);
}

/* Sampled clients {1, 3} of 4 holding 2, 3, 1 and 4 samples: slot 0 is client 1's update
 * (weight 3), slot 1 client 3's (weight 4), the total 7. */
static void test_round_weighs_sampled_clients(void **state)
{
    (void)state;
    const int64_t start[5] = {0, 2, 5, 6, 10};
    const int sampled[2] = {1, 3};
    const float global[3] = {0.0f, 0.0f, 1.0f};
    float slots[6] = {1.0f, 2.0f, 0.0f, 5.0f, 6.0f, 2.0f}, out[3];
    const double total = dt_fed_weigh_round(slots, 2, 3, start, sampled, NULL);
    if (total != 7.0)
        fail_msg("total samples of clients {1, 3}: expected 7, got %g (clients {0, 1} have 5)",
                 total);
    const float want_slots[6] = {3.0f, 6.0f, 0.0f, 20.0f, 24.0f, 8.0f};
    for (int i = 0; i < 6; i++)
        if (slots[i] != want_slots[i])
            fail_msg("slot %d element %d: expected %g (client %d's weight %lld), got %g", i / 3,
                     i % 3, want_slots[i], sampled[i / 3],
                     (long long)(start[sampled[i / 3] + 1] - start[sampled[i / 3]]), slots[i]);
    dt_fed_average(global, slots, 2, 3, total, NULL, out);
    const double want[3] = {23.0 / 7.0, 30.0 / 7.0, 1.0 + 8.0 / 7.0};
    DT_ASSERT_CLOSE_F("the average of clients {1, 3}", out, want, 3, 0.0, 1e-6);
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
    dt_fed_average(global, slot, 1, 2, 7.0, NULL, out);
    for (int i = 0; i < 2; i++)
        if (out[i] != c[i])
            fail_msg("element %d: expected the client's %g, got %g", i, c[i], out[i]);
}

/* A dropped client is left out whole: clients {1, 3} as above with client 2 (1 sample, its
 * update all NaN) sampled between them in slot 1. Weighed and averaged with slot 1 dropped,
 * the round is the average of clients {1, 3} above, bit for bit: no NaN reaches it, and the
 * total is 7, not 8. With every slot dropped, the global model stays. */
static void test_dropped_client_left_out(void **state)
{
    (void)state;
    const int64_t start[5] = {0, 2, 5, 6, 10};
    const int sampled[3] = {1, 2, 3};
    const double dropped[3] = {0, 1, 0}, all[3] = {1, 1, 1};
    const float global[3] = {0.0f, 0.0f, 1.0f};
    float slots[9] = {1.0f, 2.0f, 0.0f, NAN, NAN, NAN, 5.0f, 6.0f, 2.0f}, out[3];
    const double total = dt_fed_weigh_round(slots, 3, 3, start, sampled, dropped);
    if (total != 7.0)
        fail_msg("total samples with client 2 dropped: expected 7, got %g (8 counts it)", total);
    dt_fed_average(global, slots, 3, 3, total, dropped, out);
    float two[6] = {1.0f, 2.0f, 0.0f, 5.0f, 6.0f, 2.0f}, want[3];
    const int pair[2] = {1, 3};
    dt_fed_average(global, two, 2, 3, dt_fed_weigh_round(two, 2, 3, start, pair, NULL), NULL, want);
    for (int i = 0; i < 3; i++)
        if (!(out[i] == want[i]))
            fail_msg("element %d with client 2 dropped: expected %.9g (clients {1, 3} alone), "
                     "got %.9g",
                     i, want[i], out[i]);
    dt_fed_average(global, slots, 3, 3, 0.0, all, out);
    for (int i = 0; i < 3; i++)
        if (out[i] != global[i])
            fail_msg("element %d with every client dropped: expected the global %g, got %g", i,
                     global[i], out[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weighted_by_samples),
        cmocka_unit_test(test_round_weighs_sampled_clients),
        cmocka_unit_test(test_one_client_is_its_model),
        cmocka_unit_test(test_dropped_client_left_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
