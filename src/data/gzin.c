/* gzin.c — a file read as gzip or as raw bytes, recognised by its content (the gzip magic
 * 1f 8b), and strict about what follows a gzip stream.
 *
 * zlib's gzread would do the decoding, but it silently ignores bytes after a gzip member
 * that do not start another member (zlib's gz_look: "trailing garbage is ignored"), so a
 * file with junk appended loaded as if it were clean. Inflating with a z_stream ourselves
 * (windowBits 15 + 16: gzip only, header and CRC-32/ISIZE trailer checked by zlib) lets the
 * reader look at what follows each member: another member is decoded too (RFC 1952 allows
 * concatenation), anything else is an error that names the file and counts the bytes. */
#include "data/data_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { GZIN_BUFFER = 1 << 17 };

struct dt_gzin {
    FILE *f;
    const char *path; /* borrowed */
    const char *who;  /* the message prefix: "idx" */
    int gzip;
    int inflating;   /* inflateInit2 done */
    int member_done; /* the current gzip member ended (Z_STREAM_END) */
    int finished;    /* no more data: the file ended cleanly */
    z_stream zs;
    unsigned char in[GZIN_BUFFER];
    /* Inflated ahead, as gzread does: a stream that is corrupt near its start fails on the
     * first read, instead of first yielding a few bytes of garbage as data. */
    unsigned char out[GZIN_BUFFER];
    size_t out_pos, out_len;
};

/* Reads more compressed input after what is left in the buffer; 0 bytes at end of file. */
static dt_status refill(dt_gzin *g, size_t *added)
{
    if (g->zs.avail_in > 0 && g->zs.next_in != g->in)
        memmove(g->in, g->zs.next_in, g->zs.avail_in);
    g->zs.next_in = g->in;
    size_t n = fread(g->in + g->zs.avail_in, 1, GZIN_BUFFER - g->zs.avail_in, g->f);
    if (n == 0 && ferror(g->f))
        return dt_fail(DT_ERR_IO, "%s: %s: read failed: %s", g->who, g->path, strerror(errno));
    g->zs.avail_in += (uInt)n;
    *added = n;
    return DT_OK;
}

dt_status dt_gzin_open(const char *path, const char *who, dt_gzin **out)
{
    DT_ASSERT(path != NULL && who != NULL && out != NULL);
    *out = NULL;
    dt_gzin *g = calloc(1, sizeof *g);
    if (g == NULL)
        return dt_fail(DT_ERR_NOMEM, "%s: %s: cannot allocate the reader", who, path);
    g->path = path;
    g->who = who;
    errno = 0;
    g->f = fopen(path, "rb");
    if (g->f == NULL) {
        dt_status st = dt_fail(DT_ERR_IO, "%s: %s: cannot open: %s", who, path,
                               errno ? strerror(errno) : "unknown error");
        free(g);
        return st;
    }
    size_t added = 0;
    dt_status st = refill(g, &added);
    if (st == DT_OK && g->zs.avail_in >= 2 && g->in[0] == 0x1f && g->in[1] == 0x8b) {
        g->gzip = 1;
        if (inflateInit2(&g->zs, 15 + 16) != Z_OK)
            st = dt_fail(DT_ERR_NOMEM, "%s: %s: zlib is out of memory", who, path);
        else
            g->inflating = 1;
    }
    if (st != DT_OK) {
        dt_gzin_close(g);
        return st;
    }
    *out = g;
    return DT_OK;
}

/* After a member: another one starts here (reset and go on), the file ends (finished), or
 * bytes that are not a gzip member follow (an error counting them). */
static dt_status next_member(dt_gzin *g)
{
    size_t added = 0;
    if (g->zs.avail_in < 2) {
        dt_status st = refill(g, &added);
        if (st != DT_OK)
            return st;
    }
    if (g->zs.avail_in == 0) {
        g->finished = 1;
        return DT_OK;
    }
    if (g->zs.avail_in >= 2 && g->zs.next_in[0] == 0x1f && g->zs.next_in[1] == 0x8b) {
        if (inflateReset(&g->zs) != Z_OK)
            return dt_fail(DT_ERR_FORMAT, "%s: %s: gzip data is corrupt (reset)", g->who, g->path);
        g->member_done = 0;
        return DT_OK;
    }
    /* Count what follows, for the message: the buffer and the rest of the file. */
    size_t trailing = g->zs.avail_in;
    struct stat sb;
    long at = ftell(g->f);
    if (fstat(fileno(g->f), &sb) == 0 && at >= 0 && (long long)sb.st_size > (long long)at)
        trailing += (size_t)((long long)sb.st_size - (long long)at);
    return dt_fail(DT_ERR_FORMAT, "%s: %s: %zu trailing bytes after the gzip stream", g->who,
                   g->path, trailing);
}

/* Inflates into the output buffer until it is full or the file ends cleanly. */
static dt_status fill(dt_gzin *g)
{
    dt_status st = DT_OK;
    size_t added = 0;
    g->out_pos = g->out_len = 0;
    while (g->out_len < GZIN_BUFFER && !g->finished) {
        if (g->member_done) {
            if ((st = next_member(g)) != DT_OK)
                return st;
            continue;
        }
        if (g->zs.avail_in == 0) {
            if ((st = refill(g, &added)) != DT_OK)
                return st;
            if (added == 0)
                return dt_fail(DT_ERR_FORMAT,
                               "%s: %s: gzip stream is truncated (unexpected end "
                               "of file)",
                               g->who, g->path);
        }
        g->zs.next_out = g->out + g->out_len;
        g->zs.avail_out = (uInt)(GZIN_BUFFER - g->out_len);
        int rc = inflate(&g->zs, Z_NO_FLUSH);
        g->out_len = GZIN_BUFFER - g->zs.avail_out;
        if (rc == Z_STREAM_END)
            g->member_done = 1;
        else if (rc == Z_MEM_ERROR)
            return dt_fail(DT_ERR_NOMEM, "%s: %s: zlib is out of memory", g->who, g->path);
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return dt_fail(DT_ERR_FORMAT, "%s: %s: gzip data is corrupt (%s)", g->who, g->path,
                           g->zs.msg != NULL ? g->zs.msg : "inflate failed");
    }
    return DT_OK;
}

dt_status dt_gzin_read(dt_gzin *g, void *buf, size_t nbytes, size_t *got)
{
    DT_ASSERT(g != NULL && got != NULL && (buf != NULL || nbytes == 0));
    unsigned char *dst = buf;
    size_t done = 0;
    *got = 0;
    if (!g->gzip) {
        /* Raw: what is buffered first, then straight from the file. */
        size_t take = g->zs.avail_in < nbytes ? g->zs.avail_in : nbytes;
        memcpy(dst, g->zs.next_in, take);
        g->zs.next_in += take;
        g->zs.avail_in -= (uInt)take;
        done = take;
        if (done < nbytes) {
            done += fread(dst + done, 1, nbytes - done, g->f);
            if (done < nbytes && ferror(g->f))
                return dt_fail(DT_ERR_IO, "%s: %s: read failed: %s", g->who, g->path,
                               strerror(errno));
        }
        *got = done;
        return DT_OK;
    }
    while (done < nbytes) {
        if (g->out_pos == g->out_len) {
            if (g->finished)
                break;
            dt_status st = fill(g);
            if (st != DT_OK)
                return st;
            continue;
        }
        size_t take = g->out_len - g->out_pos;
        if (take > nbytes - done)
            take = nbytes - done;
        memcpy(dst + done, g->out + g->out_pos, take);
        g->out_pos += take;
        done += take;
    }
    *got = done;
    return DT_OK;
}

void dt_gzin_close(dt_gzin *g)
{
    if (g == NULL)
        return;
    if (g->inflating)
        inflateEnd(&g->zs);
    if (g->f != NULL)
        fclose(g->f);
    free(g);
}
