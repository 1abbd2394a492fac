/* tensorboard.c — TensorBoard event files (tensorboard.h).
 *
 * A TFRecord is: the payload's length (uint64, little-endian), the masked CRC-32C of those 8
 * bytes, the payload, the masked CRC-32C of the payload. The payload is an Event message,
 * packed by protobuf-c from proto/tensorboard_event.proto. The CRC-32C (Castagnoli
 * polynomial, not zlib's) is computed here with the usual 256-entry table: Debian 12 ships no
 * package of the CRC-32C alone (google's crc32c library is not in bookworm), and the table is
 * checked against the standard check value in the tests. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/tensorboard.h"
#include "tensorboard_event.pb-c.h"

struct dt_tb {
    FILE *f;
    char path[4096];
};

uint32_t dt_crc32c(const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) { /* reflected polynomial 0x1EDC6F41 */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t dt_tb_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static void le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord around the packed event. */
static dt_status write_event(dt_tb *tb, const DtrainTb__Event *ev)
{
    const size_t n = dtrain_tb__event__get_packed_size(ev);
    unsigned char head[12], tail[4], *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL)
        return dt_fail(DT_ERR_NOMEM, "tensorboard: cannot pack an event");
    dtrain_tb__event__pack(ev, buf);
    for (int i = 0; i < 8; i++)
        head[i] = (unsigned char)((uint64_t)n >> (8 * i));
    le32(head + 8, dt_tb_mask(dt_crc32c(head, 8)));
    le32(tail, dt_tb_mask(dt_crc32c(buf, n)));
    const int ok = fwrite(head, 1, 12, tb->f) == 12 && fwrite(buf, 1, n, tb->f) == n &&
                   fwrite(tail, 1, 4, tb->f) == 4 && fflush(tb->f) == 0;
    free(buf);
    if (!ok)
        return dt_fail(DT_ERR_IO, "tensorboard: %s: cannot write: %s", tb->path, strerror(errno));
    return DT_OK;
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

dt_status dt_tb_open(const char *dir, dt_tb **out)
{
    *out = NULL;
    if (dir[0] == '\0')
        return dt_fail(DT_ERR_IO, "tensorboard: the output directory is empty");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dt_fail(DT_ERR_IO, "tensorboard: cannot create %s: %s", dir, strerror(errno));
    dt_tb *tb = calloc(1, sizeof *tb);
    if (tb == NULL)
        return dt_fail(DT_ERR_NOMEM, "tensorboard: out of memory");
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%ld", dir,
             (long long)time(NULL), host, (long)getpid());
    tb->f = fopen(tb->path, "wb");
    if (tb->f == NULL) {
        dt_status st =
            dt_fail(DT_ERR_IO, "tensorboard: cannot create %s: %s", tb->path, strerror(errno));
        free(tb);
        return st;
    }
    DtrainTb__Event ev = DTRAIN_TB__EVENT__INIT;
    ev.has_wall_time = 1;
    ev.wall_time = wall_time();
    ev.file_version = (char *)"brain.Event:2";
    dt_status st = write_event(tb, &ev);
    if (st != DT_OK) {
        dt_tb_close(tb);
        return st;
    }
    *out = tb;
    return DT_OK;
}

dt_status dt_tb_scalar(dt_tb *tb, const char *tag, int64_t step, double value)
{
    DtrainTb__SummaryValue v = DTRAIN_TB__SUMMARY_VALUE__INIT, *vp = &v;
    v.tag = (char *)tag;
    v.has_simple_value = 1;
    v.simple_value = (float)value;
    DtrainTb__Summary s = DTRAIN_TB__SUMMARY__INIT;
    s.n_value = 1;
    s.value = &vp;
    DtrainTb__Event ev = DTRAIN_TB__EVENT__INIT;
    ev.has_wall_time = 1;
    ev.wall_time = wall_time();
    ev.has_step = 1;
    ev.step = step;
    ev.summary = &s;
    return write_event(tb, &ev);
}

void dt_tb_close(dt_tb *tb)
{
    if (tb == NULL)
        return;
    if (tb->f != NULL)
        fclose(tb->f);
    free(tb);
}

const char *dt_tb_path(const dt_tb *tb)
{
    return tb->path;
}
