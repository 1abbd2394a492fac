/* tb_read.c — reads a TensorBoard event file with protobuf-c's own unpacking, for
 * tests/obs/cli_tensorboard.sh: checks every record's framing (length and payload CRC-32C,
 * masked as TFRecord masks them), unpacks each Event, and prints "version V" for the first
 * and "TAG STEP VALUE" for each scalar. Exits 1 on any malformed record. Also checks the
 * CRC-32C against its standard check value first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/tensorboard.h"
#include "tensorboard_event.pb-c.h"

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* TFRecord's mask of a CRC (TensorFlow's tensorflow/core/lib/hash/crc32c.h: rotate right by
 * 15 bits, add 0xa282ead8), written here from the format's definition rather than taken
 * from the library's dt_tb_mask, so that a wrong constant there fails this reader. */
static uint32_t tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static int print_event(const DtrainTb__Event *ev)
{
    if (ev->file_version != NULL) {
        printf("version %s\n", ev->file_version);
        return 0;
    }
    if (ev->summary == NULL || !ev->has_step)
        return 1;
    for (size_t i = 0; i < ev->summary->n_value; i++) {
        const DtrainTb__SummaryValue *v = ev->summary->value[i];
        if (v->tag == NULL || !v->has_simple_value)
            return 1;
        printf("%s %lld %.9g\n", v->tag, (long long)ev->step, (double)v->simple_value);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (dt_crc32c("123456789", 9) != 0xE3069283u) {
        fprintf(stderr, "tb_read: CRC-32C of \"123456789\" is %08x, not e3069283\n",
                (unsigned)dt_crc32c("123456789", 9));
        return 1;
    }
    FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
    if (f == NULL) {
        fprintf(stderr, "usage: tb_read FILE\n");
        return 2;
    }
    unsigned char head[12], tail[4];
    long records = 0;
    int bad = 0;
    while (!bad && fread(head, 1, 12, f) == 12) {
        uint64_t n = 0;
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)head[i] << (8 * i);
        unsigned char *buf = n < (1u << 26) ? malloc(n + 1) : NULL;
        bad = buf == NULL || le32(head + 8) != tfrecord_mask(dt_crc32c(head, 8)) ||
              fread(buf, 1, n, f) != n || fread(tail, 1, 4, f) != 4 ||
              le32(tail) != tfrecord_mask(dt_crc32c(buf, n));
        DtrainTb__Event *ev = bad ? NULL : dtrain_tb__event__unpack(NULL, n, buf);
        bad = bad || ev == NULL || print_event(ev) != 0;
        if (ev != NULL)
            dtrain_tb__event__free_unpacked(ev, NULL);
        free(buf);
        records += !bad;
    }
    fclose(f);
    if (bad)
        fprintf(stderr, "tb_read: record %ld is malformed\n", records + 1);
    return bad;
}
