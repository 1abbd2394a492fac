/* config_write.c — a config as the INI text dt_config_load reads back to the same config:
 * every key under its [section], the layer stack one layer per continuation line (inih
 * reads lines of at most 200 bytes). A checkpoint keeps its run's config this way, so that
 * dtrain eval and export need nothing but the checkpoint. */
#include <stdio.h>
#include <string.h>

#include "core/strbuf.h"
#include "dtrain/config.h"

static void put_layers(dt_strbuf *b, const dt_config *cfg)
{
    char spec[256];
    dt_strbuf_adds(b, "layers =\n");
    for (int i = 0; i < cfg->nlayers; i++) {
        dt_layer_spec_format(&cfg->layers[i], spec, sizeof spec);
        dt_strbuf_adds(b, "    ");
        dt_strbuf_adds(b, spec);
        dt_strbuf_adds(b, i + 1 < cfg->nlayers ? ",\n" : "\n");
    }
}

dt_status dt_config_format(const dt_config *cfg, char **out, size_t *nbytes)
{
    dt_strbuf b = {0};
    char section[32] = "", value[8192];
    *out = NULL;
    dt_strbuf_adds(&b, "# The config of the run that wrote this checkpoint (dtrain; "
                       "docs/checkpoint-format.md).\n");
    for (int i = 0; i < dt_config_key_count(); i++) {
        const char *name = dt_config_key_name(i), *dot = strchr(name, '.');
        const size_t slen = (size_t)(dot - name);
        if (strlen(section) != slen || strncmp(section, name, slen) != 0) {
            snprintf(section, sizeof section, "%.*s", (int)slen, name);
            dt_strbuf_adds(&b, "\n[");
            dt_strbuf_adds(&b, section);
            dt_strbuf_adds(&b, "]\n");
        }
        if (strcmp(name, "model.layers") == 0) {
            put_layers(&b, cfg);
            continue;
        }
        dt_config_key_format(cfg, i, value, sizeof value);
        dt_strbuf_adds(&b, dot + 1);
        dt_strbuf_adds(&b, " = ");
        dt_strbuf_adds(&b, value);
        dt_strbuf_adds(&b, "\n");
    }
    if (b.failed) {
        dt_strbuf_free(&b);
        return dt_fail(DT_ERR_NOMEM, "config: cannot format the config");
    }
    *out = b.s;
    *nbytes = b.n;
    return DT_OK;
}
