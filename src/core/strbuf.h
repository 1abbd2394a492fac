/* strbuf.h — the one growable text buffer (internal): the writers that build a file's text
 * before writing it whole (a checkpoint's config.ini, the trace, a safetensors header)
 * append to it freely and check once, at the end, whether an allocation failed. Never
 * installed. */
#ifndef DT_CORE_STRBUF_H
#define DT_CORE_STRBUF_H

#include <stddef.h>

typedef struct dt_strbuf {
    char *s;    /* the text, NUL-terminated once anything was added (NULL before); free() */
    size_t n;   /* its length, without the NUL */
    size_t cap; /* bytes allocated */
    int failed; /* an allocation (or a format) failed: the text is incomplete */
} dt_strbuf;

/* Appends n bytes of s (which may hold NULs). After a failure every call does nothing. */
void dt_strbuf_add(dt_strbuf *b, const void *s, size_t n);
/* Appends the string s. */
void dt_strbuf_adds(dt_strbuf *b, const char *s);
/* Appends printf's text. */
void dt_strbuf_addf(dt_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees the text and empties b. */
void dt_strbuf_free(dt_strbuf *b);

#endif
