/* test_weights_convnet.c — the seeds' ConvNet (examples/convnet.ini) through the weights
 * files: dt_weights_save then dt_weights_load gives every parameter back bit for bit, and
 * the file's header gives each tensor PyTorch's shape (Conv2d (C_out, C_in, kH, kW),
 * Linear (out, in)); PyTorch's own state_dict (tests/e2e/convnet_init.safetensors, written
 * by tests/e2e/gen_e2e.py) loads with those shapes, puts the values PyTorch had at given
 * 4-D indices where a row-major (C_out, C_in, kH, kW) reading finds them, and gives the
 * log-probabilities PyTorch computed from it. The MLP's files (2-D tensors only) could not
 * tell a writer that exchanges the first two dimensions of 4-D shapes from a correct one. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/safetensors.h"
#include "dtrain/train.h"

/* The ConvNet's tensors in PyTorch's state_dict: names, order and shapes. */
typedef struct expected_tensor {
    const char *name;
    int ndim;
    int64_t shape[4];
} expected_tensor;

static const expected_tensor convnet_tensors[] = {
    {"conv1.weight", 4, {32, 1, 3, 3}}, /* (C_out, C_in, kH, kW) */
    {"conv1.bias", 1, {32}},
    {"conv2.weight", 4, {64, 32, 3, 3}},
    {"conv2.bias", 1, {64}},
    {"fc1.weight", 2, {128, 9216}}, /* (out, in) */
    {"fc1.bias", 1, {128}},
    {"fc2.weight", 2, {10, 128}},
    {"fc2.bias", 1, {10}},
};
enum { NTENSORS = sizeof convnet_tensors / sizeof convnet_tensors[0] };

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t nbytes)
{
    size_t o = (size_t)snprintf(buf, nbytes, "(");
    for (int d = 0; d < ndim && o < nbytes; d++)
        o += (size_t)snprintf(buf + o, nbytes - o, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (o < nbytes)
        snprintf(buf + o, nbytes - o, ")");
}

/* Whether (ndim, shape) is e's shape; prints where and both shapes when not. */
static int shape_is(const char *where, const expected_tensor *e, int ndim, const int64_t *shape)
{
    int same = ndim == e->ndim;
    for (int d = 0; same && d < ndim; d++)
        same = shape[d] == e->shape[d];
    if (!same) {
        char got[96], want[96];
        shape_text(shape, ndim, got, sizeof got);
        shape_text(e->shape, e->ndim, want, sizeof want);
        print_error("%s: tensor '%s' has shape %s, expected PyTorch's %s\n", where, e->name, got,
                    want);
    }
    return same;
}

/* The model examples/convnet.ini describes, for batches of max_batch (parameters zero). */
static dt_model *convnet_create(int64_t max_batch)
{
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_load(dt_test_src_path("examples/convnet.ini"), &cfg));
    const dt_shape input = {.ndim = 3, .d = {1, 28, 28}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(cfg.layers, cfg.nlayers, &input, max_batch, &m));
    return m;
}

/* The model's tensors are the ConvNet's, in state_dict order, with PyTorch's shapes. */
static void check_model_tensors(const dt_model *m, const char *where)
{
    assert_int_equal(dt_model_tensor_count(m), NTENSORS);
    for (int i = 0; i < NTENSORS; i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        assert_string_equal(p->name, convnet_tensors[i].name);
        assert_true(shape_is(where, &convnet_tensors[i], p->ndim, p->shape));
    }
}

static void test_convnet_weights_round_trip(void **state)
{
    (void)state;
    dt_model *m = convnet_create(1);
    check_model_tensors(m, "dtrain's ConvNet");
    dt_model_init_params(m, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/convnet.safetensors", dt_test_tmpdir());
    DT_ASSERT_OK(dt_weights_save(m, path, 0.5, 0.5));
    const float *params = dt_model_params(m);

    /* The file as written: PyTorch's names, dtypes and shapes, the model's bytes. */
    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    assert_int_equal(dt_st_count(f), NTENSORS);
    for (int i = 0; i < NTENSORS; i++) {
        const expected_tensor *e = &convnet_tensors[i];
        const dt_st_tensor *t = dt_st_find(f, e->name);
        if (t == NULL)
            print_error("%s: no tensor '%s'\n", path, e->name);
        assert_non_null(t);
        assert_int_equal(t->dtype, DT_ST_F32);
        assert_true(shape_is("the saved file's header", e, t->ndim, t->shape));
        const dt_param_info *p = dt_model_find_tensor(m, e->name);
        assert_int_equal(t->nbytes, p->count * sizeof(float));
        float *data = malloc(t->nbytes);
        assert_non_null(data);
        memcpy(data, t->data, t->nbytes);
        char what[96];
        snprintf(what, sizeof what, "%s in the saved file", e->name);
        const int ok = dt_check_equal_bits(what, data, params + p->offset, p->count);
        free(data);
        assert_true(ok);
    }
    assert_string_equal(dt_st_metadata(f, "format"), "pt");
    /* An image model's file: its input scaling, as ever, and no other input key. */
    if (dt_st_metadata(f, "input") != NULL) {
        print_error("%s: an image model's file has metadata input = %s, expected none\n", path,
                    dt_st_metadata(f, "input"));
        fail();
    }
    assert_string_equal(dt_st_metadata(f, "input_mean"), "0.5");
    assert_string_equal(dt_st_metadata(f, "input_std"), "0.5");
    assert_string_equal(dt_st_metadata(f, "input_scaling"), "(x/255 - input_mean)/input_std");
    dt_st_close(f);

    /* Loaded into a fresh model (parameters zero), every parameter comes back. */
    dt_model *fresh = convnet_create(1);
    DT_ASSERT_OK(dt_weights_load(fresh, path));
    check_model_tensors(fresh, "the reloaded ConvNet");
    const float *back = dt_model_params(fresh);
    for (int i = 0; i < NTENSORS; i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        char what[sizeof p->name + 16];
        snprintf(what, sizeof what, "%s reloaded", p->name);
        assert_true(dt_check_equal_bits(what, back + p->offset, params + p->offset, p->count));
    }
    dt_model_free(fresh);
    dt_model_free(m);
}

/* One "name[i,j,k,l]=value" of the probe_weights metadata: the value PyTorch's tensor
 * holds at that index, compared bit for bit with the loaded parameter at the row-major
 * offset of the index in dtrain's (PyTorch-shaped) tensor. Returns the index's rank. */
static int check_probe(const dt_model *m, const char *item, size_t len)
{
    char text[128], name[64];
    assert_true(len < sizeof text);
    memcpy(text, item, len);
    text[len] = '\0';
    const char *open = strchr(text, '['), *close = strchr(text, ']');
    if (open == NULL || close == NULL || close[1] != '=' || (size_t)(open - text) >= sizeof name)
        print_error("probe_weights: malformed item '%s'\n", text);
    assert_true(open != NULL && close != NULL && close[1] == '=' &&
                (size_t)(open - text) < sizeof name);
    memcpy(name, text, (size_t)(open - text));
    name[open - text] = '\0';
    const dt_param_info *p = dt_model_find_tensor(m, name);
    if (p == NULL)
        print_error("probe_weights: the model has no tensor '%s'\n", name);
    assert_non_null(p);
    int64_t idx[DT_MAX_DIMS];
    int rank = 0;
    for (const char *s = open + 1; s < close; rank++) {
        assert_true(rank < p->ndim);
        char *end;
        idx[rank] = strtoll(s, &end, 10);
        assert_true(end > s && idx[rank] >= 0 && idx[rank] < p->shape[rank]);
        s = *end == ',' ? end + 1 : end;
    }
    if (rank != p->ndim)
        print_error("probe %s: %d indices for a tensor of %d dimensions\n", text, rank, p->ndim);
    assert_int_equal(rank, p->ndim);
    size_t off = 0;
    for (int d = 0; d < rank; d++)
        off = off * (size_t)p->shape[d] + (size_t)idx[d];
    const float want = strtof(close + 2, NULL);
    const float got = dt_model_params((dt_model *)m)[p->offset + off];
    if (memcmp(&got, &want, sizeof got) != 0)
        print_error("probe %s: dtrain's %s holds %.9g at element %zu, PyTorch %.9g\n", text, name,
                    (double)got, off, (double)want);
    assert_memory_equal(&got, &want, sizeof got);
    return rank;
}

static void test_convnet_loads_pytorch_layout(void **state)
{
    (void)state;
    char path[512]; /* dt_test_src_path's buffer is reused by convnet_create */
    snprintf(path, sizeof path, "%s", dt_test_src_path("tests/e2e/convnet_init.safetensors"));
    dt_model *m = convnet_create(1);
    DT_ASSERT_OK(dt_weights_load(m, path));
    check_model_tensors(m, "the ConvNet loaded from PyTorch's state_dict");

    dt_st_file *f = NULL;
    DT_ASSERT_OK(dt_st_open(path, &f));
    const char *probes = dt_st_metadata(f, "probe_weights");
    if (probes == NULL)
        print_error("%s: no probe_weights metadata (regenerate with make refs)\n", path);
    assert_non_null(probes);
    int n = 0, n4 = 0;
    for (const char *s = probes; *s != '\0';) {
        const char *semi = strchr(s, ';');
        const size_t len = semi != NULL ? (size_t)(semi - s) : strlen(s);
        n4 += check_probe(m, s, len) == 4;
        n++;
        s += len + (semi != NULL);
    }
    printf("%d weight probes (%d at 4-D indices) equal PyTorch's values\n", n, n4);
    assert_true(n >= 10 && n4 >= 6);

    /* The log-probabilities of a synthetic input, computed by PyTorch in float64 from
     * these weights: a layout that dtrain's convolution reads differently from PyTorch's
     * changes them by far more than float32 rounding (1.4e-7 measured). */
    float *x = dt_model_input(m);
    for (int i = 0; i < 784; i++)
        x[i] = (float)((double)((i * 37) % 101) / 50.0 - 1.0);
    const dt_forward_ctx eval = {.train = 0};
    DT_ASSERT_OK(dt_model_forward(m, 1, &eval));
    const char *out = dt_st_metadata(f, "probe_output");
    assert_non_null(out);
    double want[10];
    char *end = (char *)out;
    for (int i = 0; i < 10; i++) {
        want[i] = strtod(end, &end);
        if (*end == ',')
            end++;
    }
    assert_true(*end == '\0');
    DT_ASSERT_CLOSE_F("ConvNet log-probabilities of the probe input", dt_model_output(m), want, 10,
                      1e-5, 1e-5);
    dt_st_close(f);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convnet_weights_round_trip),
        cmocka_unit_test(test_convnet_loads_pytorch_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
