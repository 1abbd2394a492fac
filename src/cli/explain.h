/* explain.h — `dtrain train --explain-layout` (explain.c). */
#ifndef DT_CLI_EXPLAIN_H
#define DT_CLI_EXPLAIN_H

#include "dtrain/config.h"

/* Prints the tensor-parallel plan of cfg's model over parallel.tp ranks (one process, no
 * MPI); an exit code. */
int dt_cli_explain_layout(const dt_config *cfg);

#endif
