/* tensorboard.h — TensorBoard event files of scalars (`dtrain train --tensorboard DIR`):
 * records of TensorFlow's Event protocol buffer (proto/tensorboard_event.proto, encoded by
 * Debian's protobuf-c) framed as TFRecords, which TensorBoard reads as it does PyTorch's
 * SummaryWriter's files. */
#ifndef DT_CLI_TENSORBOARD_H
#define DT_CLI_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dtrain/core.h"

typedef struct dt_tb dt_tb;

/* Creates DIR (one level) and DIR/events.out.tfevents.<seconds>.<host>.<pid>, whose first
 * record gives the file version. DT_ERR_IO naming the path. Caller closes with dt_tb_close. */
dt_status dt_tb_open(const char *dir, dt_tb **out);
/* Appends one scalar (and flushes, so that TensorBoard sees it while the run goes on). */
dt_status dt_tb_scalar(dt_tb *tb, const char *tag, int64_t step, double value);
void dt_tb_close(dt_tb *tb);
const char *dt_tb_path(const dt_tb *tb);

/* The CRC-32C (Castagnoli) of n bytes, and TFRecord's masking of it; shared with the test
 * reader. */
uint32_t dt_crc32c(const void *data, size_t n);
uint32_t dt_tb_mask(uint32_t crc);

#endif
