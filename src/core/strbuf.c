/* strbuf.c — the growable text buffer (strbuf.h): doubling on demand, the NUL kept after
 * the text so that it can be handed on as a C string. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `more` bytes and the NUL after them; 0 (and b->failed) when there is none. */
static int reserve(dt_strbuf *b, size_t more)
{
    if (b->failed)
        return 0;
    if (b->cap > b->n && more < b->cap - b->n)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n <= more) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return 0;
        }
        cap *= 2;
    }
    char *grown = realloc(b->s, cap);
    if (grown == NULL) {
        b->failed = 1;
        return 0;
    }
    b->s = grown;
    b->cap = cap;
    return 1;
}

void dt_strbuf_add(dt_strbuf *b, const void *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void dt_strbuf_adds(dt_strbuf *b, const char *s)
{
    dt_strbuf_add(b, s, strlen(s));
}

void dt_strbuf_addf(dt_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    /* Formatted in place when it fits (the common case: one pass), else measured, grown
     * and formatted again. */
    const size_t room = b->s != NULL && !b->failed ? b->cap - b->n : 0;
    va_start(ap, fmt);
    const int w = vsnprintf(room > 0 ? b->s + b->n : NULL, room, fmt, ap);
    va_end(ap);
    if (w < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)w >= room) {
        if (!reserve(b, (size_t)w))
            return;
        va_start(ap, fmt);
        vsnprintf(b->s + b->n, (size_t)w + 1, fmt, ap);
        va_end(ap);
    }
    b->n += (size_t)w;
}

void dt_strbuf_free(dt_strbuf *b)
{
    free(b->s);
    *b = (dt_strbuf){0};
}
