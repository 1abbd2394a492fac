/* cli_number.c — numbers given on the command line, read whole: "4x", "1e3" for a count,
 * an overflowing count, "nan" and "inf" are refused rather than read as 4, 1, a wrapped
 * value, or a value no comparison rejects. The commands print their own message, naming
 * the option and the range it takes. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "cli/cli.h"

int dt_cli_whole(const char *text, long long lo, long long hi, long long *out)
{
    if (text == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int dt_cli_real(const char *text, double lo, double hi, double *out)
{
    if (text == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    /* ERANGE on underflow too ("1e-400"): a value that small is refused with the rest. */
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}
