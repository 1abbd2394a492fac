/* test_config.c — the config key table, the INI reader, --set, the cross-field checks,
 * the layer syntax, the kind name tables, and the three example files. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"

/* Writes `text` to a file named `name` in the test's temporary directory. */
static const char *write_ini(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dt_test_tmpdir(), name);
    if (dt_test_write_file(path, text, strlen(text)) != 0) {
        print_error("cannot write %s\n", path);
        fail();
    }
    return path;
}

static int key_index(const char *name)
{
    for (int i = 0; i < dt_config_key_count(); i++)
        if (strcmp(dt_config_key_name(i), name) == 0)
            return i;
    print_error("no key '%s' in the table\n", name);
    fail();
    return -1;
}

/* The value of `key` in *cfg as the table formats it. */
static const char *fmt(const dt_config *cfg, const char *key)
{
    static char buf[2048];
    dt_config_key_format(cfg, key_index(key), buf, sizeof buf);
    return buf;
}

#define ASSERT_FMT(cfg, key, expected)                                                             \
    do {                                                                                           \
        const char *got_ = fmt((cfg), (key));                                                      \
        if (strcmp(got_, (expected)) != 0)                                                         \
            print_error("%s:%d: %s formats as '%s', expected '%s'\n", __FILE__, __LINE__, (key),   \
                        got_, (expected));                                                         \
        assert_string_equal(got_, (expected));                                                     \
    } while (0)

/* Expects `assignment` to fail with DT_ERR_INVALID, a message containing `needle`, and
 * the config left unchanged. */
static void expect_set_fails(const char *assignment, const char *needle)
{
    dt_config c = dt_config_default();
    const dt_config before = c;
    dt_error_clear();
    dt_status st = dt_config_set(&c, assignment, "--set");
    if (st != DT_ERR_INVALID || strstr(dt_last_error(), needle) == NULL)
        print_error("--set %s: status %s, message \"%s\", expected invalid with \"%s\"\n",
                    assignment, dt_status_str(st), dt_last_error(), needle);
    assert_int_equal(st, DT_ERR_INVALID);
    assert_non_null(strstr(dt_last_error(), needle));
    assert_memory_equal(&c, &before, sizeof c);
}

static const char *const convnet_layers =
    "conv1: conv2d 32 3, relu, conv2: conv2d 64 3, relu, maxpool2d 2, dropout 0.25, flatten, "
    "fc1: linear 128, relu, dropout 0.5, fc2: linear 10, log_softmax";

static void test_defaults(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_check(&c));
    ASSERT_FMT(&c, "model.layers", convnet_layers);
    assert_int_equal(c.nlayers, 12);
    assert_string_equal(c.layers[0].name, "conv1");
    assert_string_equal(c.layers[7].name, "fc1");
    assert_int_equal(c.layers[4].stride, 0); /* maxpool2d: stride = kernel */
    assert_int_equal(c.loss, DT_LOSS_NLL);
    assert_int_equal(c.optim.kind, DT_OPTIM_ADAM);
    assert_true(c.schedule.lr == 1e-3 && c.schedule.kind == DT_SCHED_COSINE);
    assert_true(c.optim.beta1 == 0.9 && c.optim.beta2 == 0.999 && c.optim.eps == 1e-8);
    assert_true(c.optim.weight_decay == 0.0);
    assert_int_equal(c.train.epochs, 2);
    assert_int_equal(c.train.batch, 32);
    assert_int_equal(c.train.seed, 1);
    assert_int_equal(c.train.threads, 0);
    assert_int_equal(c.train.eval, 1);
    assert_int_equal(c.data.kind, DT_DATA_IDX);
    assert_string_equal(c.data.dir, "/usr/share/datasets/fashion-mnist");
    assert_true(c.data.mean == 0.5 && c.data.std == 0.5);
    assert_int_equal(c.data.num_classes, 10);
    assert_int_equal(c.data.shuffle, 1);
    assert_int_equal(c.data.synth_samples, 4096);
    assert_int_equal(c.data.synth_features, 16);
    assert_int_equal(c.data.synth_targets, 4);
    assert_true(c.data.synth_noise == 0.1);
    assert_int_equal(c.data.synth_seed, 7);
    assert_int_equal(c.data.test_samples, 512);
    assert_int_equal(c.parallel.dp, 0);
    assert_int_equal(c.parallel.accumulation, 1);
    assert_int_equal(c.parallel.last_batch, DT_LAST_BATCH_UNEVEN);
    assert_int_equal(c.parallel.lr_scaling_linear, 0);
    assert_true(c.parallel.bucket_cap_mb == 25.0 && c.parallel.first_bucket_mb == 1.0);
    assert_int_equal(c.parallel.zero, 0);
    assert_int_equal(c.parallel.overlap, 1);
    assert_int_equal(c.comm.algorithm, DT_COMM_ALGO_AUTO);
    assert_int_equal(c.comm.deterministic, 0);
    assert_true(c.comm.timeout_s == 300.0);
    assert_int_equal(c.comm.check, 0);
    assert_string_equal(c.source, "");
}

static void test_int_keys(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "train.epochs=7", "--set"));
    assert_int_equal(c.train.epochs, 7);
    DT_ASSERT_OK(dt_config_set(&c, "  train.batch =  +32  ", "--set"));
    assert_int_equal(c.train.batch, 32);
    DT_ASSERT_OK(dt_config_set(&c, "train.threads=4", "--set"));
    assert_int_equal(c.train.threads, 4);
    expect_set_fails("train.epochs=abc", "train.epochs: 'abc' is not an integer");
    expect_set_fails("train.epochs=3.5", "'3.5' is not an integer");
    expect_set_fails("train.epochs=", "'' is not an integer");
    expect_set_fails("train.epochs=0x10", "'0x10' is not an integer");
    expect_set_fails("train.epochs=99999999999999999999", "out of range for a 64-bit integer");
    expect_set_fails("train.epochs=-1", "train.epochs: -1 is out of range (must be >= 0)");
    expect_set_fails("train.batch=0",
                     "train.batch: 0 is out of range (must be in [1, 2147483647])");
    expect_set_fails("train.threads=-2", "train.threads: -2 is out of range");
    expect_set_fails("train.threads=99999999999", "out of range for an int");
    expect_set_fails("parallel.zero=4", "parallel.zero: 4 is out of range (must be in [0, 3])");
    expect_set_fails("parallel.accumulation=0", "parallel.accumulation: 0 is out of range");
}

static void test_uint64_and_double_keys(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "train.seed=18446744073709551615", "--set"));
    assert_true(c.train.seed == UINT64_MAX);
    ASSERT_FMT(&c, "train.seed", "18446744073709551615");
    expect_set_fails("train.seed=-1", "train.seed: '-1' is not a non-negative integer");
    expect_set_fails("train.seed=18446744073709551616", "out of range for a 64-bit integer");
    expect_set_fails("data.synth_seed=7x", "data.synth_seed: '7x' is not a non-negative integer");

    DT_ASSERT_OK(dt_config_set(&c, "optim.lr=2.5e-2", "--set"));
    assert_true(c.schedule.lr == 0.025);
    ASSERT_FMT(&c, "optim.lr", "0.025");
    DT_ASSERT_OK(dt_config_set(&c, "data.mean=-0.25", "--set"));
    assert_true(c.data.mean == -0.25);
    expect_set_fails("optim.lr=fast", "optim.lr: 'fast' is not a number");
    expect_set_fails("optim.lr=nan", "optim.lr: 'nan' is not a finite number");
    expect_set_fails("optim.lr=inf", "'inf' is not a finite number");
    expect_set_fails("optim.lr=1e999", "'1e999' is not a finite number");
    expect_set_fails("optim.lr=0", "optim.lr: 0 is out of range (must be > 0)");
    expect_set_fails("optim.beta2=1", "optim.beta2: 1 is out of range (must be in [0, 1))");
    expect_set_fails("data.std=0", "data.std: 0 is out of range (must be > 0)");
    expect_set_fails("schedule.warmup_start=1.5", "must be in [0, 1]");
    expect_set_fails("comm.timeout=-3", "comm.timeout: -3 is out of range (must be > 0)");
}

static void test_bool_enum_path_list_keys(void **state)
{
    (void)state;
    static const char *const on[] = {"on", "yes", "true", "1", "ON", "True"};
    static const char *const off[] = {"off", "no", "false", "0", "OFF", "No"};
    dt_config c = dt_config_default();
    char buf[64];
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        snprintf(buf, sizeof buf, "comm.check=%s", on[i]);
        DT_ASSERT_OK(dt_config_set(&c, buf, "--set"));
        assert_int_equal(c.comm.check, 1);
        snprintf(buf, sizeof buf, "comm.check=%s", off[i]);
        DT_ASSERT_OK(dt_config_set(&c, buf, "--set"));
        assert_int_equal(c.comm.check, 0);
    }
    expect_set_fails("data.shuffle=maybe", "data.shuffle: 'maybe' is not a boolean");
    expect_set_fails("data.shuffle=2", "is not a boolean");

    DT_ASSERT_OK(dt_config_set(&c, "data.kind=csv", "--set"));
    assert_int_equal(c.data.kind, DT_DATA_CSV);
    DT_ASSERT_OK(dt_config_set(&c, "data.kind=synthetic", "--set"));
    assert_int_equal(c.data.kind, DT_DATA_SYNTH_LINREG);
    DT_ASSERT_OK(dt_config_set(&c, "data.csv_header=yes", "--set"));
    assert_int_equal(c.data.csv_header, 1);
    DT_ASSERT_OK(dt_config_set(&c, "data.csv_header=no", "--set"));
    assert_int_equal(c.data.csv_header, 0);
    DT_ASSERT_OK(dt_config_set(&c, "data.csv_header=auto", "--set"));
    assert_int_equal(c.data.csv_header, -1);
    DT_ASSERT_OK(dt_config_set(&c, "loss.kind=mse", "--set"));
    assert_int_equal(c.loss, DT_LOSS_MSE);
    DT_ASSERT_OK(dt_config_set(&c, "schedule.kind=cosine", "--set"));
    assert_int_equal(c.schedule.kind, DT_SCHED_COSINE);
    DT_ASSERT_OK(dt_config_set(&c, "parallel.last_batch=pad", "--set"));
    assert_int_equal(c.parallel.last_batch, DT_LAST_BATCH_PAD);
    DT_ASSERT_OK(dt_config_set(&c, "parallel.lr_scaling=linear", "--set"));
    assert_int_equal(c.parallel.lr_scaling_linear, 1);
    DT_ASSERT_OK(dt_config_set(&c, "comm.algorithm=ring", "--set"));
    assert_int_equal(c.comm.algorithm, DT_COMM_ALGO_RING);
    expect_set_fails("data.kind=parquet",
                     "data.kind: unknown value 'parquet' (one of: idx, csv, synthetic, text)");
    expect_set_fails("loss.kind=hinge", "(one of: cross_entropy, nll, mse)");
    expect_set_fails("optim.kind=lamb", "(one of: sgd, adam, adamw)");
    expect_set_fails("schedule.kind=linear", "(one of: constant, step, cosine)");
    expect_set_fails("parallel.last_batch=skip", "(one of: uneven, drop, pad)");
    expect_set_fails("parallel.lr_scaling=sqrt", "(one of: none, linear)");
    expect_set_fails("comm.algorithm=tree", "(one of: auto, mpi, ring)");
    expect_set_fails("data.csv_header=maybe", "(one of: auto, no, yes)");

    DT_ASSERT_OK(dt_config_set(&c, "data.train_file=/tmp/a b.csv", "--set"));
    assert_string_equal(c.data.train_file, "/tmp/a b.csv");
    DT_ASSERT_OK(dt_config_set(&c, "data.test_file=\"\"", "--set"));
    assert_string_equal(c.data.test_file, "");
    ASSERT_FMT(&c, "data.test_file", "\"\"");
    char longpath[700];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "data.dir=", 9);
    longpath[sizeof longpath - 1] = '\0';
    expect_set_fails(longpath, "data.dir: path of 690 characters is longer than 511");

    DT_ASSERT_OK(dt_config_set(&c, "data.csv_targets=0, 1,-1", "--set"));
    assert_int_equal(c.data.n_csv_targets, 3);
    assert_int_equal(c.data.csv_targets[0], 0);
    assert_int_equal(c.data.csv_targets[1], 1);
    assert_int_equal(c.data.csv_targets[2], -1);
    ASSERT_FMT(&c, "data.csv_targets", "0, 1, -1");
    DT_ASSERT_OK(dt_config_set(&c, "data.csv_targets=4", "--set")); /* replaces */
    assert_int_equal(c.data.n_csv_targets, 1);
    assert_int_equal(c.data.csv_targets[0], 4);
    expect_set_fails("data.csv_targets=0,,1", "data.csv_targets: empty column in '0,,1'");
    expect_set_fails("data.csv_targets=0,0", "column 0 is listed twice");
    expect_set_fails("data.csv_targets=a", "'a' is not an integer");
    expect_set_fails("data.csv_targets=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
                     "more than 16 target columns");
}

static void test_set_errors_name_origin(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_STATUS(dt_config_set(&c, "train.epochs=abc", "--set"), DT_ERR_INVALID);
    assert_string_equal(dt_last_error(), "config: --set: train.epochs: 'abc' is not an integer");
    DT_ASSERT_STATUS(dt_config_set(&c, "train.epochs=abc", "--epochs"), DT_ERR_INVALID);
    assert_string_equal(dt_last_error(), "config: --epochs: train.epochs: 'abc' is not an integer");
    DT_ASSERT_STATUS(dt_config_set(&c, "train.epochs", "--set"), DT_ERR_INVALID);
    assert_string_equal(dt_last_error(), "config: --set: 'train.epochs' is not section.key=value");
    DT_ASSERT_STATUS(dt_config_set(&c, "optim.lrr=1", "--set"), DT_ERR_INVALID);
    assert_string_equal(dt_last_error(),
                        "config: --set: unknown key 'optim.lrr' (did you mean optim.lr?)");
    DT_ASSERT_STATUS(dt_config_set(&c, "train.lr=1", "--set"), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown key 'train.lr' (did you mean optim.lr?)");
    DT_ASSERT_STATUS(dt_config_set(&c, "nothing.here=1", "--set"), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown key 'nothing.here' (dtrain train --help lists the keys)");
}

static void test_file_errors_name_line(void **state)
{
    (void)state;
    struct {
        const char *text, *message;
        dt_status status;
    } cases[] = {
        {"[train]\nepochs = 3\n\n[optim]\nlrr = 0.1\n",
         "bad.ini:5: unknown key 'optim.lrr' "
         "(did you mean optim.lr?)",
         DT_ERR_INVALID},
        {"# comment\n[train]\nepochs = 3\n[trian]\nbatch = 4\n",
         /* then the sections of the registry's strategy settings (localsgd, ...) */
         "bad.ini:4: unknown section [trian] (sections: data, model, loss, optim, schedule, "
         "train, checkpoint, parallel, fedavg, comm",
         DT_ERR_INVALID},
        {"[train]\nepochs = 3\n[empty]\n", "bad.ini:3: unknown section [empty]", DT_ERR_INVALID},
        {"[data]\nkind = idx\n[train]\n; note\nepochs = abc\n",
         "bad.ini:5: train.epochs: 'abc' is not an integer", DT_ERR_INVALID},
        {"[train]\nbatch = 0\n", "bad.ini:2: train.batch: 0 is out of range", DT_ERR_INVALID},
        {"[train]\nepochs 3\n",
         "bad.ini:2: 'epochs 3' is not 'key = value', '[section]' or a "
         "comment",
         DT_ERR_INVALID},
        {"[train\nepochs = 3\n", "bad.ini:1: section header '[train' has no ']'", DT_ERR_INVALID},
        {"epochs = 3\n", "bad.ini:1: key 'epochs' is outside any [section]", DT_ERR_INVALID},
        {"[train]\nepochs = 3\nbatch = 8\nepochs = 4\n",
         "bad.ini:4: train.epochs is set twice (first at line 2)", DT_ERR_INVALID},
        {"[train]\nepochs = 3\n    4\n",
         "bad.ini:3: train.epochs: takes one value, but an indented line continues it",
         DT_ERR_INVALID},
        {"[model]\nlayers = linear 4,\n    relu,\n    conv2d 3\n",
         "bad.ini:4: model.layers: layer 2: layer 'conv2d 3': conv2d needs 2 arguments "
         "(out_channels kernel), got 1",
         DT_ERR_INVALID},
        {"[model]\nlayers = relu\n  [loss]\nkind = mse\n",
         "bad.ini:3: '[loss]' is indented, so it continues model.layers: a section header "
         "must start its line",
         DT_ERR_INVALID},
        {"[optim]\nkind = adam\nlr = 0.1 # fast\neps = 1e-8 x\n",
         "bad.ini:4: optim.eps: '1e-8 x' is not a number", DT_ERR_INVALID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_ini("bad.ini", cases[i].text);
        dt_config c = dt_config_default();
        const dt_config before = c;
        dt_error_clear();
        dt_status st = dt_config_load(path, &c);
        char want[1200];
        snprintf(want, sizeof want, "config: %s/%s", dt_test_tmpdir(), cases[i].message);
        if (st != cases[i].status || strncmp(dt_last_error(), want, strlen(want)) != 0)
            print_error("case %zu: status %s, message\n  \"%s\"\nexpected %s with a message "
                        "starting\n  \"%s\"\n",
                        i, dt_status_str(st), dt_last_error(), dt_status_str(cases[i].status),
                        want);
        assert_int_equal(st, cases[i].status);
        assert_true(strncmp(dt_last_error(), want, strlen(want)) == 0);
        /* A failed load leaves the caller's config as it was. */
        assert_memory_equal(&c, &before, sizeof c);
    }

    /* A line too long for inih's buffer is refused, not split into two lines. */
    char text[400];
    snprintf(text, sizeof text, "[data]\ndir = /%0250d\n", 0);
    const char *path = write_ini("long.ini", text);
    dt_config c = dt_config_default();
    DT_ASSERT_STATUS(dt_config_load(path, &c), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("long.ini:2: line longer than 197 characters");

    char missing[600];
    snprintf(missing, sizeof missing, "%s/does-not-exist.ini", dt_test_tmpdir());
    DT_ASSERT_STATUS(dt_config_load(missing, &c), DT_ERR_IO);
    DT_ASSERT_ERROR_HAS(missing);
    DT_ASSERT_ERROR_HAS("No such file");
}

static void test_file_values_and_layers(void **state)
{
    (void)state;
    const char *path =
        write_ini("good.ini", "\xEF\xBB\xBF# a BOM, then keys before any section in full\n"
                              "train.epochs = 3\n"
                              "[model]\n"
                              "; the first occurrence in a file replaces the built-in ConvNet\n"
                              "layers =\n"
                              "    flatten,            # comment after a layer\n"
                              "\n"
                              "    hidden: linear 128, relu\n"
                              "    dropout 0.2, linear 10 bias=off\n"
                              "[loss]\n"
                              "kind = cross_entropy ; inline comment\n"
                              "[ data ]\n"
                              "  csv_targets = 0,\n"
                              "     2\n"
                              "test_file = \"\"\n");
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_load(path, &c));
    assert_int_equal(c.train.epochs, 3);
    assert_int_equal(c.nlayers, 5);
    ASSERT_FMT(&c, "model.layers",
               "flatten, hidden: linear 128, relu, dropout 0.2, "
               "linear 10 bias=off");
    assert_int_equal(c.loss, DT_LOSS_CROSS_ENTROPY);
    assert_int_equal(c.data.n_csv_targets, 2);
    assert_int_equal(c.data.csv_targets[1], 2);
    assert_string_equal(c.source, path);

    /* --set model.layers replaces the layers too. */
    DT_ASSERT_OK(dt_config_set(&c, "model.layers=linear 4", "--set"));
    assert_int_equal(c.nlayers, 1);
    assert_int_equal(c.layers[0].out_features, 4);
    expect_set_fails("model.layers=linear 4,,relu", "model.layers: empty layer in");
    expect_set_fails("model.layers=linear 4, lstm 3", "model.layers: layer 1: layer 'lstm 3': "
                                                      "unknown layer kind 'lstm'");
    /* More than DT_CONFIG_MAX_LAYERS. */
    char many[2048] = "model.layers=relu";
    for (int i = 1; i <= DT_CONFIG_MAX_LAYERS; i++)
        strcat(many, ",relu");
    expect_set_fails(many, "more than 64 layers");
}

static void test_layer_spec_round_trip(void **state)
{
    (void)state;
    static const char *const canonical[] = {
        "linear 128",
        "linear 3 bias=off",
        "fc1: linear 10",
        "conv2d 32 3",
        "conv1: conv2d 16 5 stride=2 padding=1 bias=off",
        "maxpool2d 2",
        "maxpool2d 3 stride=1",
        "relu",
        "dropout 0.25",
        "drop_1: dropout 0",
        "dropout 1",
        "flatten",
        "log_softmax",
        "layernorm",
        "ln_f: layernorm",
        "gelu",
        "embedding 256 128",
        "wte: embedding 16777216 1",
        "position",
        "causal_attention 4",
        "causal_attention 3 p=0.1",
        "transformer.h.0: block 4",
        "block 3 p=0.1 attn_p=0.2",
        "block 2 attn_p=0.5",
        "lm_head",
    };
    for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++) {
        dt_layer_spec s, again;
        char text[160];
        DT_ASSERT_OK(dt_layer_spec_parse(canonical[i], &s));
        dt_layer_spec_format(&s, text, sizeof text);
        if (strcmp(text, canonical[i]) != 0)
            print_error("'%s' formats back as '%s'\n", canonical[i], text);
        assert_string_equal(text, canonical[i]);
        DT_ASSERT_OK(dt_layer_spec_parse(text, &again));
        assert_memory_equal(&s, &again, sizeof s);
    }
    /* Defaults written out, spaces, and a maxpool stride equal to the kernel. */
    static const char *const loose[][2] = {
        {"  conv2d   32 3 stride=1 padding=0 bias=on ", "conv2d 32 3"},
        {"fc1 :linear 128 bias=yes", "fc1: linear 128"},
        {"maxpool2d 2 stride=2", "maxpool2d 2"},
        {"maxpool2d 2 stride=0", "maxpool2d 2"},
        {"dropout", "dropout 0.5"},
        {"dropout 2.5e-1", "dropout 0.25"},
        {"causal_attention 2 p=0", "causal_attention 2"},
        {"causal_attention 2 p=2.5e-1", "causal_attention 2 p=0.25"},
    };
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        dt_layer_spec s;
        char text[160];
        DT_ASSERT_OK(dt_layer_spec_parse(loose[i][0], &s));
        dt_layer_spec_format(&s, text, sizeof text);
        assert_string_equal(text, loose[i][1]);
    }
    dt_layer_spec s;
    DT_ASSERT_OK(dt_layer_spec_parse("c: conv2d 8 5 stride=2 padding=3", &s));
    assert_int_equal(s.kind, DT_LAYER_CONV2D);
    assert_string_equal(s.name, "c");
    assert_int_equal(s.out_channels, 8);
    assert_int_equal(s.kernel, 5);
    assert_int_equal(s.stride, 2);
    assert_int_equal(s.padding, 3);
    assert_int_equal(s.bias, 1);

    static const char *const bad[][2] = {
        {"", "no layer kind"},
        {"fc1:", "no layer kind after the name"},
        {"conv2d 32", "conv2d needs 2 arguments (out_channels kernel), got 1"},
        {"linear", "linear needs 1 argument (out_features), got 0"},
        {"relu 3", "relu takes no arguments, got '3'"},
        {"linear 3 4", "linear takes 1 argument (out_features), got another: '4'"},
        {"linear 0", "out_features: 0 is out of range (must be in [1, 2147483647])"},
        {"linear 12x", "out_features: '12x' is not an integer"},
        {"linear 99999999999", "out_features: 99999999999 is out of range"},
        {"conv2d 3 3 foo=1", "conv2d has no option 'foo' (options: stride padding bias)"},
        {"conv2d 3 3 stride=0", "stride: 0 is out of range"},
        {"conv2d 3 3 padding=-1", "padding: -1 is out of range"},
        {"conv2d 3 3 stride=2 stride=2", "option 'stride' given twice"},
        {"maxpool2d 2 padding=1", "maxpool2d has no option 'padding' (options: stride)"},
        {"relu inplace=1", "relu takes no options, got 'inplace'"},
        {"dropout 1.5", "p: 1.5 is out of range (must be in [0, 1])"},
        {"dropout -0.1", "p: -0.1 is out of range"},
        {"dropout half", "p: 'half' is not a number"},
        {"linear 3 bias=maybe", "bias: 'maybe' is not a boolean"},
        {"fc1 linear 3", "unknown layer kind 'fc1' (one of: linear, conv2d"},
        {"1: linear 3", "layer name '1' is only digits"},
        {"bad-name: relu", "layer name 'bad-name' may hold only letters, digits and '_'"},
        {"a..b: relu", "layer name 'a..b' may hold only letters, digits and '_', in words"},
        {".a: relu", "layer name '.a' may hold"},
        {"a.: relu", "layer name 'a.' may hold"},
        {"block", "block needs 1 argument (heads), got 0"},
        {"block 4 p=1", "p: 1 is out of range (must be in [0, 1)"},
        {"block 4 attn_p=1", "p: 1 is out of range (must be in [0, 1)"},
        {"block 4 bias=off", "block has no option 'bias' (options: p attn_p)"},
        {"lm_head 256", "lm_head takes no arguments"},
        {"h: 2 x block 4", "one layer expected, not a repeat"},
        {"h: 0 x block 4", "repeat: 0 is out of range"},
        {": relu", "empty layer name before ':'"},
        {"a_name_that_is_far_too_long_to_be_a_layer_name_here: relu", "is longer than 47"},
        {"embedding 256", "embedding needs 2 arguments (vocab width), got 1"},
        {"embedding 0 4", "vocab: 0 is out of range"},
        {"embedding 4 0", "width: 0 is out of range"},
        {"causal_attention", "causal_attention needs 1 argument (heads), got 0"},
        {"causal_attention 0", "heads: 0 is out of range"},
        {"causal_attention 2 p=1", "p: 1 is out of range (must be in [0, 1)"},
        {"causal_attention 2 p=-0.5", "p: -0.5 is out of range"},
        {"causal_attention 2 bias=off", "causal_attention has no option 'bias' (options: p)"},
        {"layernorm 5", "layernorm takes no arguments, got '5'"},
        {"gelu approximate=tanh", "gelu takes no options, got 'approximate'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_error_clear();
        dt_status st = dt_layer_spec_parse(bad[i][0], &s);
        char want[200];
        snprintf(want, sizeof want, "layer '%s': ", bad[i][0]);
        if (st != DT_ERR_INVALID || strstr(dt_last_error(), bad[i][1]) == NULL ||
            (bad[i][0][0] != '\0' && strncmp(dt_last_error(), want, strlen(want)) != 0))
            print_error("'%s': status %s, message \"%s\", expected \"%s\"\n", bad[i][0],
                        dt_status_str(st), dt_last_error(), bad[i][1]);
        assert_int_equal(st, DT_ERR_INVALID);
        assert_non_null(strstr(dt_last_error(), bad[i][1]));
    }
}

/* The transformer's kinds in one layer list (docs/CONFIG.md): parsed, formatted back as
 * written. */
static void test_gpt_layer_list(void **state)
{
    (void)state;
    static const char *const gpt =
        "embedding 256 128, position, layernorm, linear 384, causal_attention 4, linear 128, "
        "layernorm, gelu, linear 256";
    dt_config c = dt_config_default();
    char assign[256];
    snprintf(assign, sizeof assign, "model.layers=%s", gpt);
    DT_ASSERT_OK(dt_config_set(&c, assign, "--set"));
    assert_int_equal(c.nlayers, 9);
    assert_int_equal(c.layers[0].kind, DT_LAYER_EMBEDDING);
    assert_int_equal(c.layers[0].vocab, 256);
    assert_int_equal(c.layers[0].out_features, 128);
    assert_int_equal(c.layers[4].kind, DT_LAYER_CAUSAL_ATTENTION);
    assert_int_equal(c.layers[4].heads, 4);
    assert_true(c.layers[4].p == 0.0);
    ASSERT_FMT(&c, "model.layers", gpt);
    /* GPT-2's residual blocks, one repeated: named .0, .1, ...; written out one by one. */
    DT_ASSERT_OK(dt_config_set(&c,
                               "model.layers=wte: embedding 256 32, position, "
                               "transformer.h: 3 x block 4 p=0.1, ln_f: layernorm, lm_head",
                               "--set"));
    assert_int_equal(c.nlayers, 7);
    assert_int_equal(c.layers[2].kind, DT_LAYER_BLOCK);
    assert_string_equal(c.layers[2].name, "transformer.h.0");
    assert_string_equal(c.layers[4].name, "transformer.h.2");
    assert_int_equal(c.layers[4].heads, 4);
    assert_true(c.layers[4].p == 0.1);
    ASSERT_FMT(&c, "model.layers",
               "wte: embedding 256 32, position, transformer.h.0: block 4 p=0.1, transformer.h.1: "
               "block 4 p=0.1, transformer.h.2: block 4 p=0.1, ln_f: layernorm, lm_head");
    dt_error_clear();
    assert_int_equal(dt_config_set(&c, "model.layers=relu, h: 64 x block 2", "--set"),
                     DT_ERR_INVALID);
    assert_non_null(strstr(dt_last_error(), "more than 64 layers"));
}

/* A GPT given without names takes GPT2LMHeadModel's module names (its files then load there);
 * names the user gave stay; a list that is no GPT keeps its indices, and a later line of
 * model.layers that makes the list no GPT takes the names away again. */
static void test_gpt_named_as_hf(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c,
                               "model.layers=embedding 256 32, position, dropout 0.1, "
                               "2 x block 4, layernorm, lm_head",
                               "--set"));
    static const char *const hf[] = {"transformer.wte", "transformer.wpe", "transformer.drop",
                                     "transformer.h.0", "transformer.h.1", "transformer.ln_f",
                                     "lm_head"};
    assert_int_equal(c.nlayers, 7);
    for (int i = 0; i < 7; i++)
        if (strcmp(c.layers[i].name, hf[i]) != 0)
            fail_msg("layer %d of an unnamed GPT: named '%s', expected '%s'", i, c.layers[i].name,
                     hf[i]);
    /* one name given: the user's names, the rest indices */
    DT_ASSERT_OK(dt_config_set(&c,
                               "model.layers=embedding 256 32, position, h: 2 x block 4, "
                               "layernorm, lm_head",
                               "--set"));
    assert_string_equal(c.layers[0].name, "");
    assert_string_equal(c.layers[2].name, "h.0");
    /* not a GPT */
    DT_ASSERT_OK(dt_config_set(&c, "model.layers=embedding 256 32, position, block 4", "--set"));
    for (int i = 0; i < c.nlayers; i++)
        assert_string_equal(c.layers[i].name, "");
    /* a file whose continuation line makes the GPT no GPT */
    const char *path = write_ini("gpt_names.ini", "[model]\n"
                                                  "layers = embedding 256 32, position,\n"
                                                  "    block 4, layernorm, lm_head\n");
    dt_config g = dt_config_default();
    DT_ASSERT_OK(dt_config_load(path, &g));
    assert_string_equal(g.layers[2].name, "transformer.h.0");
    path = write_ini("gpt_names2.ini", "[model]\n"
                                       "layers = embedding 256 32, position, block 4,\n"
                                       "    layernorm, lm_head, relu\n");
    g = dt_config_default();
    DT_ASSERT_OK(dt_config_load(path, &g));
    for (int i = 0; i < g.nlayers; i++)
        if (g.layers[i].name[0] != '\0')
            fail_msg("layer %d of a list that is no GPT: named '%s', expected none", i,
                     g.layers[i].name);
}

static void test_kind_names(void **state)
{
    (void)state;
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++) {
        dt_layer_kind back;
        DT_ASSERT_OK(dt_layer_kind_parse(dt_layer_kind_name((dt_layer_kind)k), &back));
        assert_int_equal(back, k);
        dt_layer_spec d = dt_layer_spec_default((dt_layer_kind)k);
        assert_int_equal(d.kind, k);
        assert_int_equal(d.bias, 1);
        assert_true(d.p == (k == DT_LAYER_CAUSAL_ATTENTION || k == DT_LAYER_BLOCK ? 0.0 : 0.5));
        assert_true(d.attn_p == 0.0);
        assert_int_equal(d.stride, k == DT_LAYER_MAXPOOL2D ? 0 : 1);
    }
    for (int k = 0; k < DT_LOSS_KIND_COUNT; k++) {
        dt_loss_kind back;
        DT_ASSERT_OK(dt_loss_kind_parse(dt_loss_kind_name((dt_loss_kind)k), &back));
        assert_int_equal(back, k);
    }
    for (int k = 0; k < DT_OPTIM_KIND_COUNT; k++) {
        dt_optim_kind back;
        DT_ASSERT_OK(dt_optim_kind_parse(dt_optim_kind_name((dt_optim_kind)k), &back));
        assert_int_equal(back, k);
    }
    for (int k = 0; k < DT_SCHED_KIND_COUNT; k++) {
        dt_sched_kind back;
        DT_ASSERT_OK(dt_sched_kind_parse(dt_sched_kind_name((dt_sched_kind)k), &back));
        assert_int_equal(back, k);
    }
    dt_layer_kind lk;
    dt_loss_kind sk;
    dt_optim_kind ok;
    dt_sched_kind ck;
    DT_ASSERT_STATUS(dt_layer_kind_parse("Linear", &lk), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown layer kind 'Linear'");
    DT_ASSERT_STATUS(dt_loss_kind_parse("l1", &sk), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown loss 'l1'");
    DT_ASSERT_STATUS(dt_optim_kind_parse("rmsprop", &ok), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown optimizer 'rmsprop'");
    DT_ASSERT_STATUS(dt_sched_kind_parse("poly", &ck), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown schedule 'poly'");
    assert_string_equal(dt_layer_kind_name((dt_layer_kind)99), "unknown");

    /* PyTorch 1.13's defaults. */
    dt_optim_config sgd = dt_optim_config_default(DT_OPTIM_SGD);
    assert_true(sgd.momentum == 0.0 && sgd.dampening == 0.0 && sgd.nesterov == 0);
    assert_true(sgd.weight_decay == 0.0);
    dt_optim_config adamw = dt_optim_config_default(DT_OPTIM_ADAMW);
    assert_true(adamw.weight_decay == 0.01 && adamw.beta1 == 0.9 && adamw.beta2 == 0.999);
    assert_true(adamw.eps == 1e-8);
    dt_schedule s = dt_schedule_default();
    assert_int_equal(s.kind, DT_SCHED_CONSTANT);
    assert_int_equal(s.warmup_steps, 0);
    assert_true(s.warmup_start == 0.0 && s.gamma == 0.1 && s.min_lr == 0.0);
    assert_int_equal(s.step_size, 1);

    dt_shape sh = {3, {1, 28, 28, 0}};
    char buf[64];
    assert_int_equal(dt_shape_numel(&sh), 784);
    assert_string_equal(dt_shape_str(&sh, buf, sizeof buf), "(1, 28, 28)");
    dt_shape v = {1, {10, 0, 0, 0}};
    assert_string_equal(dt_shape_str(&v, buf, sizeof buf), "(10)");
    assert_string_equal(dt_shape_str(&sh, buf, 6), "(1, 2"); /* truncated, terminated */
}

static void test_help_table(void **state)
{
    (void)state;
    const dt_config def = dt_config_default();
    static const char *const sections[] = {"data",  "model",      "loss",     "optim",  "schedule",
                                           "train", "checkpoint", "parallel", "fedavg", "comm"};
    const int n = dt_config_key_count();
    assert_true(n >= 55);
    for (int i = 0; i < n; i++) {
        const char *name = dt_config_key_name(i);
        const char *dot = strchr(name, '.');
        assert_non_null(dot);
        int known = 0;
        for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++)
            known |= strlen(sections[s]) == (size_t)(dot - name) &&
                     strncmp(sections[s], name, (size_t)(dot - name)) == 0;
        /* A strategy's own settings live in its section ([localsgd]). */
        for (int j = 0; j < dt_strategy_setting_count(); j++) {
            dt_strategy_setting_info si;
            DT_ASSERT_OK(dt_strategy_setting_describe(j, &si));
            known |= strcmp(si.key, name) == 0 && strlen(si.strategy) == (size_t)(dot - name) &&
                     strncmp(si.strategy, name, (size_t)(dot - name)) == 0;
        }
        if (!known)
            print_error("key %s is in no known section\n", name);
        assert_true(known);
        assert_true(strlen(dt_config_key_help(i)) > 10);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(name, dt_config_key_name(j));

        /* Every default formats to text that --set reads back to the same value. */
        char val[2048], assign[2200], again[2048];
        dt_config_key_format(&def, i, val, sizeof val);
        snprintf(assign, sizeof assign, "%s=%s", name, val);
        dt_config c = dt_config_default();
        DT_ASSERT_OK(dt_config_set(&c, assign, "--set"));
        dt_config_key_format(&c, i, again, sizeof again);
        assert_string_equal(val, again);

        /* An enum's help text names every value it accepts. */
        snprintf(assign, sizeof assign, "%s=no-such-value", name);
        if (dt_config_set(&c, assign, "--set") == DT_OK)
            continue;
        const char *choices = strstr(dt_last_error(), "(one of: ");
        if (choices == NULL)
            continue;
        char list[256];
        snprintf(list, sizeof list, "%s", choices + strlen("(one of: "));
        list[strcspn(list, ")")] = '\0';
        /* The strategies are the registry's: --help lists them (tests/cli/help.sh), and the
         * key's help sends the reader there; each one is a value the key takes. */
        if (strcmp(name, "parallel.strategy") == 0) {
            assert_non_null(strstr(dt_config_key_help(i), "--help"));
            for (int k = 0; k < dt_strategy_count(); k++) {
                snprintf(assign, sizeof assign, "%s=%s", name, dt_strategy_name(k));
                DT_ASSERT_OK(dt_config_set(&c, assign, "--set"));
                assert_non_null(strstr(list, dt_strategy_name(k)));
            }
            continue;
        }
        for (char *tok = strtok(list, ", "); tok != NULL; tok = strtok(NULL, ", ")) {
            if (strstr(dt_config_key_help(i), tok) == NULL)
                print_error("help of %s (\"%s\") does not mention '%s'\n", name,
                            dt_config_key_help(i), tok);
            assert_non_null(strstr(dt_config_key_help(i), tok));
        }
    }
    ASSERT_FMT(&def, "train.epochs", "2");
    ASSERT_FMT(&def, "train.batch", "32");
    ASSERT_FMT(&def, "optim.lr", "0.001");
    ASSERT_FMT(&def, "optim.beta2", "0.999");
    ASSERT_FMT(&def, "optim.eps", "1e-08");
    ASSERT_FMT(&def, "optim.kind", "adam");
    ASSERT_FMT(&def, "loss.kind", "nll");
    ASSERT_FMT(&def, "data.shuffle", "on");
    ASSERT_FMT(&def, "data.csv_header", "auto");
    ASSERT_FMT(&def, "data.csv_targets", "-1");
    ASSERT_FMT(&def, "data.synth_noise", "0.1");
    ASSERT_FMT(&def, "parallel.last_batch", "uneven");
    ASSERT_FMT(&def, "parallel.lr_scaling", "none");
    ASSERT_FMT(&def, "parallel.bucket_cap_mb", "25");
    ASSERT_FMT(&def, "comm.algorithm", "auto");
    ASSERT_FMT(&def, "comm.timeout", "300");
    ASSERT_FMT(&def, "comm.deterministic", "off");
    ASSERT_FMT(&def, "model.layers", convnet_layers);
    /* A small buffer gets a terminated prefix. */
    char small[8];
    dt_config_key_format(&def, key_index("model.layers"), small, sizeof small);
    assert_string_equal(small, "conv1: ");
}

static void test_optim_kind_defaults(void **state)
{
    (void)state;
    /* Not set explicitly: each kind's PyTorch default. */
    dt_config c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=adamw", "--set"));
    assert_int_equal(c.optim.kind, DT_OPTIM_ADAMW);
    assert_true(c.optim.weight_decay == 0.01);
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=adam", "--set"));
    assert_true(c.optim.weight_decay == 0.0);
    assert_true(c.schedule.lr == 1e-3); /* the learning rate is not the kind's */

    /* Set explicitly (even to the old kind's default): kept, before or after the kind. */
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "optim.weight_decay=0", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=adamw", "--set"));
    assert_true(c.optim.weight_decay == 0.0);
    DT_ASSERT_OK(dt_config_set(&c, "optim.weight_decay=0.05", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=sgd", "--set"));
    assert_true(c.optim.weight_decay == 0.05);

    /* SGD settings survive a round trip through another kind; unset ones reset. */
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=sgd", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.momentum=0.9", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.nesterov=on", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=adamw", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=sgd", "--set"));
    assert_true(c.optim.momentum == 0.9 && c.optim.nesterov == 1);
    assert_true(c.optim.weight_decay == 0.0 && c.optim.dampening == 0.0);
    DT_ASSERT_OK(dt_config_check(&c));

    /* In a file, in either order; and a later --set of the kind keeps the file's values. */
    const char *path = write_ini("optim.ini", "[optim]\nweight_decay = 0\nkind = adamw\n");
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_load(path, &c));
    assert_true(c.optim.weight_decay == 0.0);
    path = write_ini("optim2.ini", "[optim]\nkind = adamw\nbeta1 = 0.8\n");
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_load(path, &c));
    assert_true(c.optim.weight_decay == 0.01 && c.optim.beta1 == 0.8);
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=adam", "--set"));
    assert_true(c.optim.weight_decay == 0.0 && c.optim.beta1 == 0.8);
}

/* Expects dt_config_check to refuse c with DT_ERR_INVALID and a message containing
 * `needle`. */
static void expect_check_refuses(const dt_config *c, const char *needle)
{
    dt_error_clear();
    dt_status st = dt_config_check(c);
    if (st != DT_ERR_INVALID || strstr(dt_last_error(), needle) == NULL)
        print_error("check: status %s, message \"%s\", expected invalid with \"%s\"\n",
                    dt_status_str(st), dt_last_error(), needle);
    assert_int_equal(st, DT_ERR_INVALID);
    assert_non_null(strstr(dt_last_error(), needle));
}

/* dt_config_given: how each key was set (an option by its name, --set and other origins
 * beside the key, a file's key with its line), and dt_config_check's refusal of a key set
 * explicitly without effect, by that name; defaults are never judged. */
static void test_given(void **state)
{
    (void)state;
    dt_config c = dt_config_default();
    for (int i = 0; i < dt_config_key_count(); i++)
        assert_null(dt_config_given(&c, dt_config_key_name(i)));
    DT_ASSERT_OK(dt_config_check(&c)); /* the defaults include ps's and fedavg's settings */
    DT_ASSERT_OK(dt_config_set(&c, "train.epochs=3", "--epochs"));
    DT_ASSERT_OK(dt_config_set(&c, "train.batch=8", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "train.seed=4", "program"));
    assert_string_equal(dt_config_given(&c, "train.epochs"), "--epochs");
    assert_string_equal(dt_config_given(&c, "train.batch"), "train.batch (--set)");
    assert_string_equal(dt_config_given(&c, "train.seed"), "train.seed (program)");
    DT_ASSERT_OK(dt_config_check(&c));

    const char *path = write_ini("given.ini", "[train]\nepochs = 1\n[parallel]\nstaleness = 2\n");
    DT_ASSERT_OK(dt_config_load(path, &c));
    char want[1200];
    snprintf(want, sizeof want, "parallel.staleness (%s:4)", path);
    assert_string_equal(dt_config_given(&c, "parallel.staleness"), want);
    snprintf(want, sizeof want,
             "config: parallel.staleness (%s:4) has no effect under --strategy ddp: it applies "
             "to --strategy ps",
             path);
    expect_check_refuses(&c, want);
    dt_config ps = c;
    DT_ASSERT_OK(dt_config_set(&ps, "parallel.strategy=ps", "--strategy"));
    DT_ASSERT_OK(dt_config_check(&ps));

    /* The same value, not given: a default, not judged. */
    dt_config_forget_given(&c);
    assert_null(dt_config_given(&c, "parallel.staleness"));
    DT_ASSERT_OK(dt_config_check(&c));

    /* One of config_inert.c's, order-independent: momentum, then the kind that uses it. */
    c = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&c, "optim.momentum=0.9", "--set"));
    expect_check_refuses(&c, "optim.momentum (--set) has no effect with optim.kind adam");
    DT_ASSERT_OK(dt_config_set(&c, "optim.kind=sgd", "--set"));
    DT_ASSERT_OK(dt_config_check(&c));
}

/* Sets one field by hand (as a program using the library may), expects the check to fail
 * naming `needle`. */
#define EXPECT_CHECK_FAILS(stmt, needle)                                                           \
    do {                                                                                           \
        dt_config c = dt_config_default();                                                         \
        stmt;                                                                                      \
        dt_error_clear();                                                                          \
        DT_ASSERT_STATUS(dt_config_check(&c), DT_ERR_INVALID);                                     \
        DT_ASSERT_ERROR_HAS(needle);                                                               \
    } while (0)

static void test_check(void **state)
{
    (void)state;
    EXPECT_CHECK_FAILS(c.nlayers = 0, "config: model.layers: the model has no layers");
    EXPECT_CHECK_FAILS(c.layers[5].p = 1.5, "layer 5: layer 'dropout 1.5': p: 1.5 is out of range");
    EXPECT_CHECK_FAILS(c.layers[0].kernel = 0, "layer 0: layer 'conv1: conv2d 32 0'");
    EXPECT_CHECK_FAILS(strcpy(c.layers[2].name, "conv1"), "layers 0 and 2 are both named 'conv1'");
    EXPECT_CHECK_FAILS(c.layers[1].kind = (dt_layer_kind)42, "layer 1: unknown kind 42");
    EXPECT_CHECK_FAILS(c.train.batch = 0, "config: train.batch must be >= 1, got 0");
    EXPECT_CHECK_FAILS(c.schedule.lr = 0, "optim.lr must be > 0");
    EXPECT_CHECK_FAILS((c.optim = dt_optim_config_default(DT_OPTIM_SGD), c.optim.nesterov = 1),
                       "optim.nesterov requires optim.momentum > 0 and optim.dampening = 0");
    EXPECT_CHECK_FAILS((c.optim = dt_optim_config_default(DT_OPTIM_SGD), c.optim.nesterov = 1,
                        c.optim.momentum = 0.9, c.optim.dampening = 0.1),
                       "optim.nesterov requires");
    EXPECT_CHECK_FAILS(c.optim.beta1 = 1.0, "optim.beta1 and optim.beta2 must be in [0, 1)");
    EXPECT_CHECK_FAILS(c.data.std = 0, "config: data.std must be > 0");
    EXPECT_CHECK_FAILS(c.data.dir[0] = '\0', "config: data.dir: empty");
    EXPECT_CHECK_FAILS(c.loss = DT_LOSS_MSE, "loss.kind mse needs regression targets");
    EXPECT_CHECK_FAILS(c.data.kind = DT_DATA_CSV, "config: data.train_file: empty");
    EXPECT_CHECK_FAILS((c.data.kind = DT_DATA_CSV, strcpy(c.data.train_file, "x.csv")),
                       "loss.kind nll needs class labels: set data.csv_labels = on");
    EXPECT_CHECK_FAILS((c.data.kind = DT_DATA_CSV, strcpy(c.data.train_file, "x.csv"),
                        c.data.csv_labels = 1, c.data.n_csv_targets = 2),
                       "data.csv_labels needs exactly one column");
    EXPECT_CHECK_FAILS(
        (c.data.kind = DT_DATA_SYNTH_LINREG, c.loss = DT_LOSS_MSE, c.data.test_samples = 4096),
        "data.test_samples (4096) must be in [0, data.synth_samples (4096))");
    EXPECT_CHECK_FAILS(c.data.kind = DT_DATA_SYNTH_LINREG,
                       "loss.kind nll needs class labels, but data.kind synthetic");
    EXPECT_CHECK_FAILS(c.parallel.accumulation = 0, "config: parallel.accumulation must be >= 1");
    EXPECT_CHECK_FAILS(c.parallel.zero = 5, "config: parallel.zero must be 0, 1 or 3, got 5");
    {
        /* ZeRO-2 is a stage dtrain has not built: not supported, rather than invalid */
        dt_config c = dt_config_default();
        c.parallel.zero = 2;
        dt_error_clear();
        DT_ASSERT_STATUS(dt_config_check(&c), DT_ERR_UNSUPPORTED);
        DT_ASSERT_ERROR_HAS("parallel.zero 2 (gradients sharded, parameters whole) is not built");
    }
    EXPECT_CHECK_FAILS(c.parallel.bucket_cap_mb = 0, "parallel.bucket_cap_mb");
    EXPECT_CHECK_FAILS(c.parallel.dp = -1, "parallel.dp, parallel.tp and parallel.pp");
    EXPECT_CHECK_FAILS(c.comm.timeout_s = 0, "config: comm.timeout must be > 0 seconds");
    EXPECT_CHECK_FAILS((c.schedule.kind = DT_SCHED_COSINE, c.schedule.min_lr = 0.1),
                       "schedule.min_lr (0.1) is above optim.lr (0.001)");
    EXPECT_CHECK_FAILS((c.schedule.kind = DT_SCHED_STEP, c.schedule.step_size = 0),
                       "schedule.step_size must be >= 1");

    /* Valid corner cases: max_steps alone, a cosine schedule over the whole run. */
    dt_config c = dt_config_default();
    c.train.epochs = 0;
    c.train.max_steps = 10;
    c.schedule.kind = DT_SCHED_COSINE;
    c.schedule.total_steps = 0;
    DT_ASSERT_OK(dt_config_check(&c));
    DT_ASSERT_OK(dt_config_set(&c, "data.kind=csv", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "data.train_file=x.csv", "--set"));
    DT_ASSERT_OK(dt_config_set(&c, "data.csv_labels=on", "--set"));
    DT_ASSERT_OK(dt_config_check(&c));
}

static void test_examples(void **state)
{
    (void)state;
    dt_config conv = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/convnet.ini"), &conv));
    DT_ASSERT_OK(dt_config_check(&conv));
    /* The ConvNet example writes out exactly the built-in defaults. Loaded over a config
     * that differs everywhere it can, it must still give the defaults' value for every key
     * it sets, and the keys it leaves out must already be at their defaults. */
    const dt_config def = dt_config_default();
    for (int i = 0; i < dt_config_key_count(); i++) {
        char a[2048], b[2048];
        dt_config_key_format(&def, i, a, sizeof a);
        dt_config_key_format(&conv, i, b, sizeof b);
        if (strcmp(a, b) != 0)
            print_error("convnet.ini: %s = %s, default %s\n", dt_config_key_name(i), b, a);
        assert_string_equal(a, b);
    }
    dt_config other = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&other, "model.layers=linear 2", "--set"));
    DT_ASSERT_OK(dt_config_set(&other, "loss.kind=cross_entropy", "--set"));
    DT_ASSERT_OK(dt_config_set(&other, "train.epochs=9", "--set"));
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/convnet.ini"), &other));
    assert_string_equal(fmt(&other, "model.layers"), convnet_layers);
    assert_int_equal(other.loss, DT_LOSS_NLL);
    assert_int_equal(other.train.epochs, 2);

    dt_config mlp = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/mlp.ini"), &mlp));
    DT_ASSERT_OK(dt_config_check(&mlp));
    ASSERT_FMT(&mlp, "model.layers", "flatten, linear 128, relu, dropout 0.2, linear 10");
    assert_int_equal(mlp.loss, DT_LOSS_CROSS_ENTROPY);
    assert_int_equal(mlp.optim.kind, DT_OPTIM_ADAM);
    assert_true(mlp.schedule.lr == 2e-3);
    assert_int_equal(mlp.schedule.kind, DT_SCHED_COSINE);
    assert_int_equal(mlp.data.kind, DT_DATA_IDX);

    dt_config lin = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/linreg.ini"), &lin));
    DT_ASSERT_OK(dt_config_check(&lin));
    ASSERT_FMT(&lin, "model.layers", "linear 4");
    assert_int_equal(lin.data.kind, DT_DATA_SYNTH_LINREG);
    assert_int_equal(lin.loss, DT_LOSS_MSE);
    assert_int_equal(lin.schedule.kind, DT_SCHED_COSINE);
    assert_true(lin.schedule.warmup_steps > 0);
    assert_int_equal(lin.data.synth_targets, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_int_keys),
        cmocka_unit_test(test_uint64_and_double_keys),
        cmocka_unit_test(test_bool_enum_path_list_keys),
        cmocka_unit_test(test_set_errors_name_origin),
        cmocka_unit_test(test_file_errors_name_line),
        cmocka_unit_test(test_file_values_and_layers),
        cmocka_unit_test(test_layer_spec_round_trip),
        cmocka_unit_test(test_gpt_layer_list),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_help_table),
        cmocka_unit_test(test_optim_kind_defaults),
        cmocka_unit_test(test_given),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_gpt_named_as_hf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
