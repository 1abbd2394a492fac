/* config_write.c — a config as the INI text dt_config_load reads back to the same config:
 * every key under its [section], the layer stack one layer per continuation line (inih
 * reads lines of at most 200 bytes). A checkpoint keeps its run's config this way, so that
 * dtrain eval and export need nothing but the checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"

typedef struct text_buf {
    char *s;
    size_t n, cap;
    int failed;
} text_buf;

static void put(text_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *grown = realloc(b->s, cap);
        if (grown == NULL) {
            b->failed = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void puts_(text_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_layers(text_buf *b, const dt_config *cfg)
{
    char spec[256];
    puts_(b, "layers =\n");
    for (int i = 0; i < cfg->nlayers; i++) {
        dt_layer_spec_format(&cfg->layers[i], spec, sizeof spec);
        puts_(b, "    ");
        puts_(b, spec);
        puts_(b, i + 1 < cfg->nlayers ? ",\n" : "\n");
    }
}

dt_status dt_config_format(const dt_config *cfg, char **out, size_t *nbytes)
{
    text_buf b = {0};
    char section[32] = "", value[8192];
    *out = NULL;
    puts_(&b, "# The config of the run that wrote this checkpoint (dtrain; "
              "docs/checkpoint-format.md).\n");
    for (int i = 0; i < dt_config_key_count(); i++) {
        const char *name = dt_config_key_name(i), *dot = strchr(name, '.');
        const size_t slen = (size_t)(dot - name);
        if (strlen(section) != slen || strncmp(section, name, slen) != 0) {
            snprintf(section, sizeof section, "%.*s", (int)slen, name);
            puts_(&b, "\n[");
            puts_(&b, section);
            puts_(&b, "]\n");
        }
        if (strcmp(name, "model.layers") == 0) {
            put_layers(&b, cfg);
            continue;
        }
        dt_config_key_format(cfg, i, value, sizeof value);
        puts_(&b, dot + 1);
        puts_(&b, " = ");
        puts_(&b, value);
        puts_(&b, "\n");
    }
    if (b.failed) {
        free(b.s);
        return dt_fail(DT_ERR_NOMEM, "config: cannot format the config");
    }
    *out = b.s;
    *nbytes = b.n;
    return DT_OK;
}
