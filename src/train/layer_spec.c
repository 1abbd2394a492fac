/* layer_spec.c — one layer's description as text, both ways:
 *
 *     [name:] kind [positional arguments] [option=value ...]
 *
 *     conv2d 32 3 stride=1 padding=0 bias=off   out_channels kernel
 *     fc1: linear 128                            out_features; tensors fc1.weight, fc1.bias
 *     maxpool2d 2 stride=2                       kernel (stride defaults to the kernel)
 *     dropout 0.25                               p (default 0.5, as torch.nn.Dropout)
 *     relu | flatten | log_softmax               no arguments
 *     layernorm | gelu | position                no arguments
 *     embedding 256 128                          vocab width: (T) ids -> (T, 128)
 *     causal_attention 4 p=0.1                   heads; p: dropout on the probabilities (0)
 *     transformer.h.0: block 4 p=0.1 attn_p=0.1  heads; GPT-2's residual block (nn/block.c)
 *     lm_head                                    logits through the embedding's transpose
 *
 * A layer list may repeat a layer: "transformer.h: 12 x block 4" is twelve blocks named
 * transformer.h.0 .. transformer.h.11 (dt_layer_spec_parse_repeat); the spec itself is
 * always one layer.
 *
 * The format writes the canonical form (defaults left out), which parses back to the same
 * spec, so `--help`, logs and checkpoints show what a config would have to say. Each
 * value is range-checked here; whether a layer fits its input is the model's question. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/config.h"
#include "train/config_internal.h"

#define LAYER_TEXT_MAX 256
#define LAYER_MAX_TOKENS 16

/* Dimensions are bounded so that no product in the model's planning can overflow from a
 * typo ("linear 1280000000000"). */
#define DIM_MAX ((int64_t)INT32_MAX)

typedef struct kind_syntax {
    int required, optional; /* positional arguments */
    const char *positional; /* their names, for messages */
    const char *options;    /* the option=value names it accepts, space separated */
} kind_syntax;

static const kind_syntax syntax[DT_LAYER_KIND_COUNT] = {
    [DT_LAYER_LINEAR] = {1, 0, "out_features", "bias"},
    [DT_LAYER_CONV2D] = {2, 0, "out_channels kernel", "stride padding bias"},
    [DT_LAYER_MAXPOOL2D] = {1, 0, "kernel", "stride"},
    [DT_LAYER_RELU] = {0, 0, "", ""},
    [DT_LAYER_DROPOUT] = {0, 1, "p", ""},
    [DT_LAYER_FLATTEN] = {0, 0, "", ""},
    [DT_LAYER_LOG_SOFTMAX] = {0, 0, "", ""},
    [DT_LAYER_LAYERNORM] = {0, 0, "", ""},
    [DT_LAYER_GELU] = {0, 0, "", ""},
    [DT_LAYER_EMBEDDING] = {2, 0, "vocab width", ""},
    [DT_LAYER_POSITION] = {0, 0, "", ""},
    [DT_LAYER_CAUSAL_ATTENTION] = {1, 0, "heads", "p"},
    [DT_LAYER_BLOCK] = {1, 0, "heads", "p attn_p"},
    [DT_LAYER_LM_HEAD] = {0, 0, "", ""},
};

/* A probability: in [0, 1], or [0, 1) when `below_one`. */
static dt_status parse_p(const char *text, int below_one, double *out)
{
    if (dt_cfg_parse_double(text, out) != DT_OK) {
        dt_error_prefix("p: ");
        return DT_ERR_INVALID;
    }
    if (!(*out >= 0.0 && (below_one ? *out < 1.0 : *out <= 1.0)))
        return dt_fail(DT_ERR_INVALID, "p: %g is out of range (must be in [0, 1%s)", *out,
                       below_one ? "" : "]");
    return DT_OK;
}

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ')
            p++;
        const char *end = p;
        while (*end != '\0' && *end != ' ')
            end++;
        if ((size_t)(end - p) == n && strncmp(p, word, n) == 0)
            return 1;
        p = end;
    }
    return 0;
}

/* An integer in [lo, DIM_MAX]; `what` names it in the message. */
static dt_status parse_dim(const char *text, const char *what, int64_t lo, int64_t *out)
{
    int64_t v = 0;
    if (dt_cfg_parse_int64(text, &v) != DT_OK) {
        dt_error_prefix("%s: ", what);
        return DT_ERR_INVALID;
    }
    if (v < lo || v > DIM_MAX)
        return dt_fail(DT_ERR_INVALID, "%s: %lld is out of range (must be in [%lld, %lld])", what,
                       (long long)v, (long long)lo, (long long)DIM_MAX);
    *out = v;
    return DT_OK;
}

/* A layer name becomes the prefix of tensor names ("fc1.weight"), which PyTorch's
 * state_dict keys must be able to match: letters, digits and '_', in words joined by '.'
 * ("transformer.h.0", a submodule's path), not only digits (those are the names unnamed
 * layers get from their index). */
static dt_status check_name(const char *name, size_t len)
{
    if (len == 0)
        return dt_fail(DT_ERR_INVALID, "empty layer name before ':'");
    if (len >= DT_NAME_MAX)
        return dt_fail(DT_ERR_INVALID, "layer name '%.*s' is longer than %d characters", (int)len,
                       name, DT_NAME_MAX - 1);
    int letters = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.' && i > 0 && i + 1 < len && name[i + 1] != '.')
            continue;
        if (!(isalnum(c) || c == '_'))
            return dt_fail(DT_ERR_INVALID,
                           "layer name '%.*s' may hold only letters, digits and '_', in words "
                           "joined by single dots",
                           (int)len, name);
        letters += !isdigit(c);
    }
    if (letters == 0)
        return dt_fail(DT_ERR_INVALID,
                       "layer name '%.*s' is only digits, which unnamed layers use (their index)",
                       (int)len, name);
    return DT_OK;
}

static dt_status parse_option(dt_layer_spec *s, const char *key, const char *value)
{
    if (strcmp(key, "bias") == 0) {
        if (dt_cfg_parse_bool(value, &s->bias) != DT_OK) {
            dt_error_prefix("bias: ");
            return DT_ERR_INVALID;
        }
        return DT_OK;
    }
    if (strcmp(key, "stride") == 0)
        /* maxpool2d's stride 0 means "the kernel size", as PyTorch's stride=None. */
        return parse_dim(value, "stride", s->kind == DT_LAYER_MAXPOOL2D ? 0 : 1, &s->stride);
    if (strcmp(key, "padding") == 0)
        return parse_dim(value, "padding", 0, &s->padding);
    if (strcmp(key, "p") == 0) /* causal_attention, block: 1 would drop everything */
        return parse_p(value, s->kind == DT_LAYER_CAUSAL_ATTENTION || s->kind == DT_LAYER_BLOCK,
                       &s->p);
    if (strcmp(key, "attn_p") == 0)
        return parse_p(value, 1, &s->attn_p);
    return dt_fail(DT_ERR_INVALID, "unknown option '%s'", key);
}

static dt_status parse_positional(dt_layer_spec *s, int index, const char *text)
{
    switch (s->kind) {
    case DT_LAYER_LINEAR:
        return parse_dim(text, "out_features", 1, &s->out_features);
    case DT_LAYER_CONV2D:
        return index == 0 ? parse_dim(text, "out_channels", 1, &s->out_channels)
                          : parse_dim(text, "kernel", 1, &s->kernel);
    case DT_LAYER_MAXPOOL2D:
        return parse_dim(text, "kernel", 1, &s->kernel);
    case DT_LAYER_DROPOUT:
        return parse_p(text, 0, &s->p);
    case DT_LAYER_EMBEDDING:
        return index == 0 ? parse_dim(text, "vocab", 1, &s->vocab)
                          : parse_dim(text, "width", 1, &s->out_features);
    case DT_LAYER_CAUSAL_ATTENTION:
    case DT_LAYER_BLOCK:
        return parse_dim(text, "heads", 1, &s->heads);
    default:
        /* Kinds without arguments never get here: the caller counts first. */
        DT_ASSERT(0);
        return DT_ERR_INVALID;
    }
}

/* Parses the trimmed, NUL-terminated `buf` (modified in place). */
/* An optional "name:" before the layer: copied into name (a zero-filled buffer, left
 * empty without one); *body is what follows it. */
static dt_status split_name(char *buf, char name[DT_NAME_MAX], char **body)
{
    *body = buf;
    char *colon = strchr(buf, ':');
    if (colon == NULL)
        return DT_OK;
    char *end = colon;
    while (end > buf && isspace((unsigned char)end[-1]))
        end--;
    if (check_name(buf, (size_t)(end - buf)) != DT_OK)
        return DT_ERR_INVALID;
    memcpy(name, buf, (size_t)(end - buf));
    name[end - buf] = '\0';
    *body = colon + 1;
    return DT_OK;
}

/* Splits body at white space, in place, into at most LAYER_MAX_TOKENS words. */
static dt_status split_words(char *body, char *tok[LAYER_MAX_TOKENS], int *ntok)
{
    *ntok = 0;
    for (char *p = body;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            return DT_OK;
        if (*ntok == LAYER_MAX_TOKENS)
            return dt_fail(DT_ERR_INVALID, "more than %d words", LAYER_MAX_TOKENS);
        tok[(*ntok)++] = p;
        while (*p != '\0' && !isspace((unsigned char)*p))
            p++;
        if (*p != '\0')
            *p++ = '\0';
    }
}

/* The words after the kind: positional arguments in order, then key=value options, each
 * at most once. */
static dt_status parse_args(dt_layer_spec *s, const kind_syntax *syn, char **tok, int ntok)
{
    int npos = 0;
    char seen[LAYER_MAX_TOKENS][16];
    int nseen = 0;
    const int takes = syn->required + syn->optional;
    for (int i = 1; i < ntok; i++) {
        char *eq = strchr(tok[i], '=');
        if (eq == NULL) {
            if (npos >= takes) {
                if (takes == 0)
                    return dt_fail(DT_ERR_INVALID, "%s takes no arguments, got '%s'", tok[0],
                                   tok[i]);
                return dt_fail(DT_ERR_INVALID, "%s takes %d argument%s (%s), got another: '%s'",
                               tok[0], takes, takes == 1 ? "" : "s", syn->positional, tok[i]);
            }
            if (parse_positional(s, npos, tok[i]) != DT_OK)
                return DT_ERR_INVALID;
            npos++;
            continue;
        }
        *eq = '\0';
        const char *key = tok[i], *value = eq + 1;
        if (!has_word(syn->options, key)) {
            if (syn->options[0] == '\0')
                return dt_fail(DT_ERR_INVALID, "%s takes no options, got '%s'", tok[0], key);
            return dt_fail(DT_ERR_INVALID, "%s has no option '%s' (options: %s)", tok[0], key,
                           syn->options);
        }
        for (int j = 0; j < nseen; j++)
            if (strcmp(seen[j], key) == 0)
                return dt_fail(DT_ERR_INVALID, "option '%s' given twice", key);
        snprintf(seen[nseen++], sizeof seen[0], "%s", key);
        if (parse_option(s, key, value) != DT_OK)
            return DT_ERR_INVALID;
    }
    if (npos < syn->required)
        return dt_fail(DT_ERR_INVALID, "%s needs %d argument%s (%s), got %d", tok[0], syn->required,
                       syn->required == 1 ? "" : "s", syn->positional, npos);
    return DT_OK;
}

/* "N x" before the kind: *repeat = N (1 without one), tok and ntok moved past it. */
static dt_status take_repeat(char ***tok, int *ntok, int64_t *repeat)
{
    *repeat = 1;
    if (*ntok < 2 || strcmp((*tok)[1], "x") != 0 || !isdigit((unsigned char)(*tok)[0][0]))
        return DT_OK;
    if (parse_dim((*tok)[0], "repeat", 1, repeat) != DT_OK)
        return DT_ERR_INVALID;
    if (*repeat > DT_CONFIG_MAX_LAYERS)
        return dt_fail(DT_ERR_INVALID, "repeat: %lld layers, at most %d", (long long)*repeat,
                       DT_CONFIG_MAX_LAYERS);
    *tok += 2;
    *ntok -= 2;
    return DT_OK;
}

static dt_status parse_body(char *buf, dt_layer_spec *out, int64_t *repeat)
{
    char name[DT_NAME_MAX] = "", *body = NULL; /* zero-filled: copied whole into the spec */
    if (split_name(buf, name, &body) != DT_OK)
        return DT_ERR_INVALID;
    char *words[LAYER_MAX_TOKENS], **tok = words;
    int ntok = 0;
    if (split_words(body, tok, &ntok) != DT_OK)
        return DT_ERR_INVALID;
    if (take_repeat(&tok, &ntok, repeat) != DT_OK)
        return DT_ERR_INVALID;
    if (ntok == 0)
        return dt_fail(DT_ERR_INVALID, "no layer kind%s", name[0] ? " after the name" : "");
    dt_layer_kind kind;
    if (dt_layer_kind_parse(tok[0], &kind) != DT_OK)
        return DT_ERR_INVALID;
    dt_layer_spec s = dt_layer_spec_default(kind);
    memcpy(s.name, name, sizeof s.name);
    if (parse_args(&s, &syntax[kind], tok, ntok) != DT_OK)
        return DT_ERR_INVALID;
    *out = s;
    return DT_OK;
}

dt_status dt_layer_spec_parse(const char *text, dt_layer_spec *out)
{
    int64_t repeat = 1;
    dt_status st = dt_layer_spec_parse_repeat(text, out, &repeat);
    if (st == DT_OK && repeat != 1)
        return dt_fail(DT_ERR_INVALID, "layer '%s': one layer expected, not a repeat", text);
    return st;
}

dt_status dt_layer_spec_parse_repeat(const char *text, dt_layer_spec *out, int64_t *repeat)
{
    DT_ASSERT(text != NULL && out != NULL && repeat != NULL);
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1]))
        n--;
    if (n >= LAYER_TEXT_MAX)
        return dt_fail(DT_ERR_INVALID, "layer '%.40s...': longer than %d characters", text,
                       LAYER_TEXT_MAX - 1);
    char buf[LAYER_TEXT_MAX];
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (parse_body(buf, out, repeat) != DT_OK) {
        dt_error_prefix("layer '%.*s': ", (int)n, text);
        return DT_ERR_INVALID;
    }
    return DT_OK;
}

void dt_layer_spec_format(const dt_layer_spec *s, char *buf, size_t nbytes)
{
    DT_ASSERT(s != NULL && buf != NULL && nbytes > 0);
    char args[128] = "";
    char p[40];
    switch (s->kind) {
    case DT_LAYER_LINEAR:
        snprintf(args, sizeof args, " %lld%s", (long long)s->out_features,
                 s->bias ? "" : " bias=off");
        break;
    case DT_LAYER_CONV2D: {
        int n = snprintf(args, sizeof args, " %lld %lld", (long long)s->out_channels,
                         (long long)s->kernel);
        if (s->stride != 1 && n > 0 && (size_t)n < sizeof args)
            n += snprintf(args + n, sizeof args - (size_t)n, " stride=%lld", (long long)s->stride);
        if (s->padding != 0 && n > 0 && (size_t)n < sizeof args)
            n +=
                snprintf(args + n, sizeof args - (size_t)n, " padding=%lld", (long long)s->padding);
        if (!s->bias && n > 0 && (size_t)n < sizeof args)
            snprintf(args + n, sizeof args - (size_t)n, " bias=off");
        break;
    }
    case DT_LAYER_MAXPOOL2D:
        /* A stride equal to the kernel is the default either way (0 or the kernel). */
        if (s->stride != 0 && s->stride != s->kernel)
            snprintf(args, sizeof args, " %lld stride=%lld", (long long)s->kernel,
                     (long long)s->stride);
        else
            snprintf(args, sizeof args, " %lld", (long long)s->kernel);
        break;
    case DT_LAYER_DROPOUT:
        dt_cfg_format_double(s->p, p, sizeof p);
        snprintf(args, sizeof args, " %s", p);
        break;
    case DT_LAYER_EMBEDDING:
        snprintf(args, sizeof args, " %lld %lld", (long long)s->vocab, (long long)s->out_features);
        break;
    case DT_LAYER_CAUSAL_ATTENTION:
        if (s->p != 0.0) {
            dt_cfg_format_double(s->p, p, sizeof p);
            snprintf(args, sizeof args, " %lld p=%s", (long long)s->heads, p);
        } else {
            snprintf(args, sizeof args, " %lld", (long long)s->heads);
        }
        break;
    case DT_LAYER_BLOCK: {
        int n = snprintf(args, sizeof args, " %lld", (long long)s->heads);
        if (s->p != 0.0 && n > 0 && (size_t)n < sizeof args) {
            dt_cfg_format_double(s->p, p, sizeof p);
            n += snprintf(args + n, sizeof args - (size_t)n, " p=%s", p);
        }
        if (s->attn_p != 0.0 && n > 0 && (size_t)n < sizeof args) {
            dt_cfg_format_double(s->attn_p, p, sizeof p);
            snprintf(args + n, sizeof args - (size_t)n, " attn_p=%s", p);
        }
        break;
    }
    default:
        break;
    }
    snprintf(buf, nbytes, "%s%s%s%s", s->name, s->name[0] ? ": " : "", dt_layer_kind_name(s->kind),
             args);
}
