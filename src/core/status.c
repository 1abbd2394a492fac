/* status.c — status names and the thread-local detailed error message. */
#include "dtrain/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DT_ERRBUF 1024

static _Thread_local char dt_errbuf[DT_ERRBUF];

const char *dt_status_str(dt_status status)
{
    static const char *const names[DT_STATUS_COUNT] = {
        [DT_OK] = "ok",
        [DT_ERR_NOMEM] = "out of memory",
        [DT_ERR_IO] = "i/o error",
        [DT_ERR_FORMAT] = "malformed input",
        [DT_ERR_INVALID] = "invalid argument",
        [DT_ERR_MISMATCH] = "mismatch",
        [DT_ERR_MPI] = "mpi error",
        [DT_ERR_TIMEOUT] = "timeout",
        [DT_ERR_NONFINITE] = "non-finite value",
        [DT_ERR_UNSUPPORTED] = "unsupported",
    };
    if ((int)status < 0 || status >= DT_STATUS_COUNT)
        return "unknown status";
    return names[status];
}

const char *dt_last_error(void) { return dt_errbuf; }

void dt_error_clear(void) { dt_errbuf[0] = '\0'; }

dt_status dt_fail(dt_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dt_errbuf, sizeof dt_errbuf, fmt, ap);
    va_end(ap);
    return status;
}

void dt_error_prefix(const char *fmt, ...)
{
    char old[DT_ERRBUF];
    memcpy(old, dt_errbuf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dt_errbuf, sizeof dt_errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof dt_errbuf)
        snprintf(dt_errbuf + n, sizeof dt_errbuf - (size_t)n, "%s", old);
}

void dt_assert_fail(const char *expr, const char *file, int line)
{
    /* The one place the library prints: programmer misuse, about to abort. */
    fprintf(stderr, "dtrain: assertion failed at %s:%d: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
