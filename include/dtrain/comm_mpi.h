/* comm_mpi.h — creating a communication handle from an MPI communicator. The only public
 * header that includes mpi.h: code that never touches MPI directly includes comm.h alone.
 *
 * The library never names MPI_COMM_WORLD: the caller (the CLI, a test, an example) passes
 * the communicator it wants to train over. */
#ifndef DTRAIN_COMM_MPI_H
#define DTRAIN_COMM_MPI_H

#include <mpi.h>

#include "dtrain/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Duplicates `comm` twice — a data communicator for the collectives and a control one for
 * the watchdog and --comm-check exchanges, so that they can never match each other's
 * messages — and sets MPI_ERRORS_RETURN on both, so MPI errors come back as DT_ERR_MPI
 * instead of ending the job. `name` labels the group in reports ("world"; NULL gives
 * "world"). Options start as dt_comm_options_default(). MPI must be initialised
 * (DT_ERR_INVALID otherwise). Collective over `comm`, which is borrowed and may be freed
 * afterwards. Caller frees with dt_comm_free. */
DT_API dt_status dt_comm_create_mpi(MPI_Comm comm, const char *name, dt_comm **out);

/* The handle's data communicator (owned by the handle: never free it), for code that must
 * call MPI itself; MPI_COMM_NULL for a handle from dt_comm_create_self. Traffic on it must
 * not use tags at or above DT_COMM_TAG_MAX. */
DT_API MPI_Comm dt_comm_mpi_comm(const dt_comm *comm);

#ifdef __cplusplus
}
#endif
#endif
