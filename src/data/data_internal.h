/* data_internal.h — what the readers in src/data/ share: the storage a dt_dataset owns.
 *
 * A data set owns at most two heap blocks (features and targets), allocated with malloc
 * or realloc by a reader (the IDX reader grows its buffer while it decompresses, which
 * dt_alloc cannot do). dt_dataset_free releases both with free(). Never installed. */
#ifndef DTRAIN_DATA_INTERNAL_H
#define DTRAIN_DATA_INTERNAL_H

#include "dtrain/data.h"

/* Hands `features` and `targets` (malloc'd, either may be NULL) to `ds`, which frees them
 * in dt_dataset_free. On failure (DT_ERR_NOMEM) frees both, so the caller never leaks
 * them; `what` names the data set in the message. */
dt_status dt_dataset_adopt(dt_dataset *ds, void *features, void *targets, const char *what);

#endif
