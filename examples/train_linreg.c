/* train_linreg.c — dtrain as a library: the seeds' linear regression trained from C, with
 * nothing but the public header. Builds against an installed dtrain with
 *
 *     cc -std=c11 train_linreg.c -ldtrain -o train_linreg
 *
 * (tests/unit/api.cmake compiles it against include/ and the shared library alone).
 * Prints each epoch's losses; exits 1 with dtrain's message if anything fails. */
#include <stdio.h>

#include <dtrain/dtrain.h>

static dt_status on_epoch(void *ctx, const dt_epoch_info *e)
{
    (void)ctx;
    printf("epoch %lld: train loss %.4f  test loss %.4f\n", (long long)e->epoch + 1,
           e->train_loss, e->test_loss);
    return DT_OK;
}

int main(void)
{
    static const char *const settings[] = {
        "data.kind=synthetic", "data.synth_samples=2048", "data.synth_features=8",
        "data.synth_targets=2", "data.test_samples=256",  "model.layers=linear 2",
        "loss.kind=mse",       "optim.lr=0.05",          "train.epochs=5",
        "train.batch=64",      "schedule.kind=constant",
    };
    dt_config cfg = dt_config_default();
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (dt_config_set(&cfg, settings[i], "train_linreg") != DT_OK)
            goto fail;
    dt_trainer *t = NULL;
    if (dt_trainer_create(&cfg, NULL, &t) != DT_OK)
        goto fail;
    dt_train_callbacks cb = {.ctx = NULL, .on_step = NULL, .on_epoch = on_epoch};
    dt_status st = dt_trainer_run(t, &cb);
    double loss = 0, acc = 0;
    if (st == DT_OK)
        st = dt_trainer_evaluate(t, &loss, &acc);
    dt_trainer_free(t);
    if (st != DT_OK)
        goto fail;
    printf("final test loss %.4f\n", loss);
    return 0;
fail:
    fprintf(stderr, "train_linreg: %s\n", dt_last_error());
    return 1;
}
