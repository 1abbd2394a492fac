/* train_figures.h — what `dtrain train` prints, records and writes to TensorBoard at the end
 * of a run about what crossed ranks: the figures the run's strategy, its tensor-parallel
 * collectives, its pipeline and the trainer tell (dt_trainer_describe), each as they name
 * it, without knowing which strategy ran. */
#ifndef DT_CLI_TRAIN_FIGURES_H
#define DT_CLI_TRAIN_FIGURES_H

#include <stdio.h>

#include "cli/cli.h"
#include "cli/tensorboard.h"
#include "dtrain/train.h"

/* Rank 0 prints a line per figure line of its own ("dtrain: LINE, rank 0: what: value unit;
 * ..."), then every rank's DT_FIGURE_EACH_RANK lines in rank order; a DT_FIGURE_VS_ALONE
 * figure is followed by the communication timed alone and the share of it hidden. With
 * `metrics`, rank 0 writes the "comm" record: the strategy, the compression mode and its
 * warm-up from `cfg`, and every named figure of its own; with `tb`, the named figures as
 * TensorBoard scalars ("comm/<name>", at the last step). Collective over the world. */
dt_status dt_cli_report_figures(dt_trainer *t, const dt_cli_world *world, const dt_config *cfg,
                                FILE *metrics, dt_tb *tb);

#endif
