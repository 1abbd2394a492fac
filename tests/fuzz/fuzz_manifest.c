/* fuzz_manifest.c — libFuzzer harness for the checkpoint manifest's reader
 * (dt_ckpt_manifest_parse, docs/checkpoint-format.md).
 *
 * The input is parsed twice: as a whole manifest, whose checksum a random input almost
 * never passes (that path tests the wrapper's checks), and as the JSON body inside a wrapper
 * with the right checksum, so that every field check is reached. What parses must keep the
 * reader's promises (file names inside the directory, at least one file, a known layout)
 * and survive a round trip: formatted again and parsed, the same manifest. A broken
 * promise aborts. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/checkpoint.h"

static void check(const dt_ckpt_manifest *m)
{
    if (m->nfiles < 1 || m->nfiles > DT_CKPT_MAX_FILES || m->dp < 1 || m->tp < 1 || m->pp < 1 ||
        (m->zero != 0 && m->zero != 1) || m->global_batch < 1 || m->step < 0)
        abort();
    for (int i = 0; i < m->nfiles; i++)
        if (m->files[i].name[0] == '.' || strchr(m->files[i].name, '/') != NULL)
            abort();
    char *text = NULL;
    size_t n = 0;
    dt_ckpt_manifest back;
    if (dt_ckpt_manifest_format(m, &text, &n) != DT_OK)
        abort();
    if (dt_ckpt_manifest_parse(text, n, "round trip", &back) != DT_OK || back.step != m->step ||
        back.seed != m->seed || back.nfiles != m->nfiles ||
        memcmp(back.files, m->files, sizeof back.files[0] * (size_t)m->nfiles) != 0 ||
        strcmp(back.optimizer, m->optimizer) != 0 || back.input_mean != m->input_mean)
        abort();
    dt_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_ckpt_manifest m;
    if (dt_ckpt_manifest_parse((const char *)data, size, "fuzz", &m) == DT_OK)
        check(&m);
    /* The body wrapped with its checksum. */
    char *wrapped = malloc(size + 64);
    if (wrapped == NULL)
        return 0;
    int head = snprintf(wrapped, 64,
                        "{\"crc32\":\"%08x\",\"manifest\":", (unsigned)dt_crc32(0, data, size));
    memcpy(wrapped + head, data, size);
    memcpy(wrapped + head + size, "}\n", 2);
    if (dt_ckpt_manifest_parse(wrapped, (size_t)head + size + 2, "fuzz", &m) == DT_OK)
        check(&m);
    free(wrapped);
    return 0;
}
