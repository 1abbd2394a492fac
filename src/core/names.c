/* names.c — looking a word up in a table of names (names.h). */
#include "core/names.h"

#include <stdio.h>
#include <string.h>

dt_status dt_name_parse(const char *const *names, int count, const char *name, const char *what,
                        int *out)
{
    DT_ASSERT(names != NULL && name != NULL && what != NULL && out != NULL);
    char choices[256] = "";
    size_t used = 0;
    for (int k = 0; k < count; k++) {
        if (strcmp(name, names[k]) == 0) {
            *out = k;
            return DT_OK;
        }
        int n = snprintf(choices + used, sizeof choices - used, "%s%s", k ? ", " : "", names[k]);
        if (n > 0 && used + (size_t)n < sizeof choices)
            used += (size_t)n;
    }
    return dt_fail(DT_ERR_INVALID, "unknown %s '%s' (one of: %s)", what, name, choices);
}
