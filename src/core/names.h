/* names.h — the one lookup of a word in a table of names (enum values' names: layer kinds,
 * losses, optimizers, schedules). The error lists the table itself, so the choices a
 * message offers cannot drift from what is accepted. Never installed. */
#ifndef DT_CORE_NAMES_H
#define DT_CORE_NAMES_H

#include "dtrain/core.h"

/* *out = the index of `name` in names[0..count) (exact match); otherwise DT_ERR_INVALID
 * "unknown <what> '<name>' (one of: a, b, c)" and *out untouched. */
dt_status dt_name_parse(const char *const *names, int count, const char *name, const char *what,
                        int *out);

#endif
