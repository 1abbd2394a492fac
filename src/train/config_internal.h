/* config_internal.h — what the config parser's three files share: strict number parsing,
 * shortest round-trip formatting of doubles, and the key table (config_keys.c) that
 * drives dt_config_load, dt_config_set and the help text (config.c). Never installed. */
#ifndef DT_CONFIG_INTERNAL_H
#define DT_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/config.h"

/* Whole-string parsers: no surrounding text, no empty string. On failure they return
 * DT_ERR_INVALID with a message quoting the text ("'12x' is not an integer"); callers
 * prefix it with the key or layer. dt_cfg_parse_double refuses NaN and infinities. */
dt_status dt_cfg_parse_int64(const char *text, int64_t *out);
dt_status dt_cfg_parse_uint64(const char *text, uint64_t *out);
dt_status dt_cfg_parse_double(const char *text, double *out);
/* on/off, yes/no, true/false, 1/0, any letter case. */
dt_status dt_cfg_parse_bool(const char *text, int *out);

/* The shortest "%.Ng" text that reads back as exactly v ("0.001", not "0.00100000000000000002"). */
void dt_cfg_format_double(double v, char *buf, size_t nbytes);

/* ---- the key table ----------------------------------------------------------------- */
/* Applies `value` to key k (an index into the table) of *cfg and records `given`, how the
 * user wrote it ("--lr", "optim.lr (run.ini:12)"), in cfg->given. `continued` is 1 for an
 * indented continuation line of a file: list keys (model.layers, data.csv_targets) append
 * it, other keys refuse it. Errors say "<key>: <why>"; the caller adds file:line or the
 * --set origin. On failure *cfg may hold part of the value: callers work on a copy. */
dt_status dt_cfg_key_apply(dt_config *cfg, int k, const char *value, int continued,
                           const char *given);
/* dt_config_check's refusal of the keys given explicitly that have no effect in the
 * config's setup, but for the strategies' own options (config_inert.c). */
dt_status dt_cfg_check_inert(const dt_config *cfg);
/* Index of "section.key", or -1. */
int dt_cfg_key_find(const char *name);
/* 1 when some key lives in [section] (section is len bytes, not NUL-terminated). */
int dt_cfg_section_known(const char *section, size_t len);
/* The sections, for error messages: "data, model, loss, ...". */
void dt_cfg_section_list(char *buf, size_t nbytes);

#endif
