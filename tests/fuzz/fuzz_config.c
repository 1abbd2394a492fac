/* fuzz_config.c — libFuzzer harness for the configuration parser: the INI file reader
 * (dt_config_load), --set overrides (dt_config_set), the layer syntax behind both, the
 * cross-field checks (dt_config_check), and the formatting of every key, which must read
 * back through dt_config_set as the same value (a broken round trip aborts).
 *
 * Input: the config file up to the first NUL byte; each further NUL-terminated piece is
 * one --set assignment ("section.key=value"), applied in order after the file (a failed
 * load leaves the defaults, which the assignments then change). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"

#define MAX_ASSIGNMENTS 16
#define VALUE_MAX 2000 /* dt_config_set takes values up to 2047 bytes */

/* Key i's value, formatted "as it would be written in a file" (config.h), must read back
 * through dt_config_set as the same value: ranks compare these texts to agree on a
 * config, and --help prints them. */
static void check_round_trip(const dt_config *cfg, int i)
{
    char value[4096], assignment[4200], again[4096];
    dt_config_key_format(cfg, i, value, sizeof value);
    if (strlen(value) >= VALUE_MAX)
        return; /* too long for --set, or cut short by the buffer */
    snprintf(assignment, sizeof assignment, "%s=%s", dt_config_key_name(i), value);
    dt_config back = *cfg;
    if (dt_config_set(&back, assignment, "fuzz") != DT_OK)
        abort();
    dt_config_key_format(&back, i, again, sizeof again);
    if (strcmp(value, again) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    const size_t file_size = nul != NULL ? (size_t)(nul - data) : size;
    dt_fuzz_file f;
    if (dt_fuzz_file_open(&f, data, file_size, 0) != 0)
        return 0;
    dt_config cfg = dt_config_default();
    (void)dt_config_load(f.path, &cfg);
    dt_fuzz_file_close(&f);

    /* The assignments: a copy of the rest, NUL-terminated so the last one ends too. */
    size_t rest = nul != NULL ? size - file_size - 1 : 0;
    char text[4096];
    if (rest >= sizeof text)
        rest = sizeof text - 1;
    if (rest > 0)
        memcpy(text, nul + 1, rest);
    text[rest] = '\0';
    for (size_t at = 0, n = 0; at < rest && n < MAX_ASSIGNMENTS; n++) {
        (void)dt_config_set(&cfg, text + at, "fuzz");
        at += strlen(text + at) + 1;
    }

    (void)dt_config_check(&cfg);
    for (int i = 0; i < dt_config_key_count(); i++)
        check_round_trip(&cfg, i);
    return 0;
}
