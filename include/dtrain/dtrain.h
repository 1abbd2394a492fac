/* dtrain.h — the whole public API of libdtrain in one include.
 *
 * core.h (status codes, errors, allocation), rng.h, blas.h, tensor.h, nn.h, model.h,
 * loss.h, optim.h, data.h, text.h, comm.h, strategy.h, safetensors.h, config.h, train.h.
 * comm_mpi.h is left out on purpose: it includes <mpi.h>, which a program that only
 * trains in one process (or lets the dtrain command launch ranks) need not have; include
 * it yourself to wrap your own MPI communicator (dt_comm_create_mpi). */
#ifndef DTRAIN_DTRAIN_H
#define DTRAIN_DTRAIN_H

#include "dtrain/core.h"
#include "dtrain/rng.h"
#include "dtrain/blas.h"
#include "dtrain/tensor.h"
#include "dtrain/nn.h"
#include "dtrain/model.h"
#include "dtrain/loss.h"
#include "dtrain/optim.h"
#include "dtrain/data.h"
#include "dtrain/text.h"
#include "dtrain/fed.h"
#include "dtrain/comm.h"
#include "dtrain/strategy.h"
#include "dtrain/safetensors.h"
#include "dtrain/config.h"
#include "dtrain/train.h"
#include "dtrain/generate.h"

#endif
