/* model_team.h — the model's thread team, for the library's other parts: the trainer runs
 * the batch gather and the optimizer's update on it too. */
#ifndef DT_MODEL_TEAM_H
#define DT_MODEL_TEAM_H

#include "core/pool.h"
#include "dtrain/model.h"

/* The team of dt_model_set_threads; NULL with one thread. Not reentrant with the model's
 * own forward and backward (one run at a time per team). */
dt_pool *dt_model_team(const dt_model *m);

#endif
