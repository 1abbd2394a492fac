/* test_fed_subset.c — FedAvg's identity over a strict subset of the clients (docs/FEDAVG.md):
 * with plain SGD and one local step per client on its whole partition, a client's update
 * is -lr grad L_c(w) (L_c its mean loss), and the average weighted by the sampled clients'
 * sample counts is -lr sum_c n_c grad L_c / sum_c n_c: one step of large-batch SGD over the
 * union of the round's clients. 6 clients of unequal sizes (a Dirichlet split of a small
 * CSV classification set), 3 sampled in the round; the reference is one process trained on
 * a CSV of just those clients' samples, one step of the whole union. Within 1e-5. The
 * average needs each slot weighed by its own client's count: weights taken from other
 * clients (the slot's index as the client) miss it. No MPI: one process simulates the
 * clients. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/fed.h"
#include "dtrain/train.h"

enum { N = 480, P = 8, CLASSES = 4, CLIENTS = 6, PER_ROUND = 3 };

/* Writes samples idx[0..n) of (x, labels) as CSV: P features, then the label. */
static void write_csv(const char *path, const float *x, const int32_t *labels, const int64_t *idx,
                      int64_t n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int64_t j = 0; j < n; j++) {
        const int64_t i = idx[j];
        for (int k = 0; k < P; k++)
            fprintf(f, "%.9g,", (double)x[i * P + k]);
        fprintf(f, "%d\n", (int)labels[i]);
    }
    assert_int_equal(fclose(f), 0);
}

static dt_config config(const char *train_file)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "data.kind=csv");
    char kv[600];
    snprintf(kv, sizeof kv, "data.train_file=%s", train_file);
    dt_test_set(&c, kv);
    dt_test_set(&c, "data.csv_header=no");
    dt_test_set(&c, "data.csv_targets=-1");
    dt_test_set(&c, "data.csv_labels=on");
    dt_test_set_int(&c, "data.num_classes", CLASSES); /* the union may miss a class */
    dt_test_set(&c, "data.test_samples=0");
    dt_test_set(&c, "model.layers=linear 16, relu, linear 4");
    dt_test_set(&c, "loss.kind=cross_entropy");
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.5");
    dt_test_set(&c, "schedule.kind=constant");
    dt_test_set(&c, "schedule.warmup_steps=0");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.threads=1");
    dt_test_set(&c, "train.seed=3");
    dt_test_set_int(&c, "train.batch", N); /* every client's whole partition in one batch */
    return c;
}

static void test_subset_round_is_large_batch_step(void **state)
{
    (void)state;
    char all_csv[300], union_csv[300];
    snprintf(all_csv, sizeof all_csv, "%s/fed_all.csv", dt_test_tmpdir());
    snprintf(union_csv, sizeof union_csv, "%s/fed_union.csv", dt_test_tmpdir());
    /* Features uniform in [-1, 1); the label is the sign pattern of two features, so that
     * the classes are learnable and every one is present. */
    static float x[N * P];
    static int32_t labels[N];
    static int64_t idx[N];
    dt_test_fill_uniform(x, N * P, 11, -1.0f, 1.0f);
    for (int64_t i = 0; i < N; i++) {
        labels[i] = (x[i * P] > 0.0f) + 2 * (x[i * P + 1] > 0.0f);
        idx[i] = i;
    }
    write_csv(all_csv, x, labels, idx, N);

    /* One round of fedavg. */
    dt_config fc = config(all_csv);
    dt_test_set(&fc, "parallel.strategy=fedavg");
    dt_test_set_int(&fc, "fedavg.clients", CLIENTS);
    dt_test_set_int(&fc, "fedavg.clients_per_round", PER_ROUND);
    dt_test_set(&fc, "fedavg.local_steps=1");
    dt_test_set(&fc, "fedavg.partition=dirichlet:0.5");
    dt_test_set(&fc, "fedavg.rounds=1");
    dt_trainer *tf = NULL;
    DT_ASSERT_OK(dt_trainer_create(&fc, NULL, &tf));
    dt_model *mf = dt_trainer_model(tf);
    const size_t n = dt_model_param_count(mf);
    float *init = malloc(n * sizeof(float));
    assert_non_null(init);
    memcpy(init, dt_model_params(mf), n * sizeof(float));
    DT_ASSERT_OK(dt_trainer_run(tf, NULL));

    /* The round's clients and their samples, as the strategy drew them. */
    const int64_t *client_of = NULL;
    int64_t moved = 0, size[CLIENTS] = {0};
    dt_trainer_fed_partition(tf, &client_of, &moved);
    assert_non_null(client_of);
    assert_int_equal(dt_trainer_train_set(tf)->n, N);
    for (int64_t i = 0; i < N; i++)
        size[client_of[i]]++;
    int sampled[PER_ROUND], in_round[CLIENTS] = {0};
    dt_fed_sample(CLIENTS, PER_ROUND, fc.train.seed, 0, sampled);
    int64_t m = 0, differ = 0;
    for (int j = 0; j < PER_ROUND; j++) {
        in_round[sampled[j]] = 1;
        differ += size[sampled[j]] != size[j];
    }
    for (int64_t i = 0; i < N; i++)
        if (in_round[client_of[i]])
            idx[m++] = i;
    fprintf(stderr,
            "clients' sizes %lld %lld %lld %lld %lld %lld; round 1 samples clients %d %d %d "
            "(%lld samples)\n",
            (long long)size[0], (long long)size[1], (long long)size[2], (long long)size[3],
            (long long)size[4], (long long)size[5], sampled[0], sampled[1], sampled[2],
            (long long)m);
    /* The case must tell the sampled clients' weights from the slots' indices. */
    if (differ == 0 || m == N)
        fail_msg("the test's seed samples clients whose sizes equal slots 0-2's clients', or "
                 "every sample: pick another train.seed");
    write_csv(union_csv, x, labels, idx, m);

    /* One step of one process over the union, from the same initial weights. */
    dt_config rc = config(union_csv);
    dt_test_set_int(&rc, "train.batch", m);
    dt_test_set(&rc, "train.max_steps=1");
    dt_trainer *tr = NULL;
    DT_ASSERT_OK(dt_trainer_create(&rc, NULL, &tr));
    dt_model *mr = dt_trainer_model(tr);
    assert_int_equal(dt_model_param_count(mr), n);
    assert_true(
        dt_check_equal_bits("initial weights (the same seed)", dt_model_params(mr), init, n));
    DT_ASSERT_OK(dt_trainer_run(tr, NULL));
    assert_true(dt_check_close_ff("fedavg round of clients (vs one large-batch step)",
                                  dt_model_params(mf), dt_model_params(mr), n, 1e-5, 0.0));
    /* The step moved the weights: the comparison is not of two unchanged models. */
    float most = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float d = dt_model_params(mr)[i] - init[i];
        most = d > most ? d : -d > most ? -d : most;
    }
    fprintf(stderr, "the step moved a weight by up to %g\n", (double)most);
    assert_true(most > 1e-3f);
    free(init);
    dt_trainer_free(tf);
    dt_trainer_free(tr);
    remove(all_csv);
    remove(union_csv);
    remove(dt_test_tmpdir());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subset_round_is_large_batch_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
