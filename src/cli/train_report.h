/* train_report.h — what `dtrain train` prints and records at the end of a run about where
 * the time went: the phase table across ranks and the straggler. */
#ifndef DT_CLI_TRAIN_REPORT_H
#define DT_CLI_TRAIN_REPORT_H

#include <stdio.h>

#include "cli/tensorboard.h"
#include "dtrain/train.h"

/* Gathers every rank's phase times (collective); rank 0 prints the table (one process: the
 * phases' times alone, no straggler and nothing in flight) and, when `metrics` is open,
 * writes a "phases" record to it, and with `tb` the mean time of each phase per step as
 * TensorBoard scalars ("phases/<name>_ms", at the last step). */
dt_status dt_cli_report_phases(dt_trainer *t, int rank, FILE *metrics, dt_tb *tb);

#endif
