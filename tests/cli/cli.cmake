# CLI tests (label cli): dtrain refuses malformed input with its own message and a non-zero
# status, and its help, metrics and weights files are what they claim. Each test runs a
# shell script under tests/cli/ that checks the exit status itself: ctest ignores the
# status of a test with a PASS_REGULAR_EXPRESSION (dt_add_cli_test's EXPECT), so the
# message regex is handed to the script instead. Each test generates its inputs in a
# temporary directory of its own.
set(DT_CLI_DIR ${CMAKE_CURRENT_LIST_DIR})
# Any python3 reads the JSON lines and safetensors headers (standard library only).
find_program(DT_PYTHON3 NAMES python3)
if(NOT DT_PYTHON3)
  message(WARNING "python3 not found: the CLI metrics and weights tests will fail")
  set(DT_PYTHON3 python3)
endif()

# dt_cli_reject(CASE CODE REGEX): tests/cli/reject.sh builds CASE's input; dtrain must
# exit with CODE (1 failure, 2 usage) and print a message matching REGEX on stderr.
function(dt_cli_reject case code regex)
  dt_add_cli_test(NAME cli_reject_${case} TIMEOUT 30
                  COMMAND sh ${DT_CLI_DIR}/reject.sh ${case} ${code} ${regex})
endfunction()

# IDX files (--data DIR with small fake files; the message names the file).
dt_cli_reject(idx_truncated 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte: truncated: 1000 data bytes, expected 2352 \(3 x 28 x 28\)$]=])
dt_cli_reject(idx_truncated_header 1
  [=[^dtrain: idx: .*/train-labels-idx1-ubyte: truncated: 6 bytes, shorter than the 8-byte header$]=])
dt_cli_reject(idx_truncated_gzip 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte\.gz: gzip stream is truncated]=])
dt_cli_reject(idx_bad_magic 1
  [=[^dtrain: idx: .*/t10k-images-idx3-ubyte: not an IDX file: magic 0x89504e47, expected 0x00000803$]=])
dt_cli_reject(idx_wrong_type 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte: data type 0x0d is not unsigned byte]=])
dt_cli_reject(idx_wrong_ndim 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte: 2 dimensions, expected 3 for images: magic 0x00000802]=])
dt_cli_reject(idx_zero_dim 1
  [=[^dtrain: idx: .*/t10k-images-idx3-ubyte: dimension 1 of images is 0$]=])
dt_cli_reject(idx_count_mismatch 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte has 3 images but .*/train-labels-idx1-ubyte has 2 labels$]=])
dt_cli_reject(idx_trailing 1
  [=[^dtrain: idx: .*/train-images-idx3-ubyte: 1 trailing bytes after the 2352 data bytes]=])
dt_cli_reject(idx_label_range 1
  [=[^dtrain: idx: .*/t10k-labels-idx1-ubyte: label 10 at 1 is not below 10$]=])
dt_cli_reject(idx_missing_dir 1
  [=[^dtrain: idx: .*/nowhere: no train-images-idx3-ubyte or train-images-idx3-ubyte\.gz$]=])

# A test set that does not fit the training set's samples (shape, targets, classes) is
# refused naming both files, before training.
dt_cli_reject(idx_shape_pair 1
  [=[^dtrain: data: the test set .*/t10k-images-idx3-ubyte has samples of shape \(1, 28, 28\), the training set .*/train-images-idx3-ubyte of shape \(1, 2, 2\)$]=])
dt_cli_reject(idx_shape_pair_close 1
  [=[^dtrain: data: the test set .*/t10k-images-idx3-ubyte has samples of shape \(1, 28, 28\), the training set .*/train-images-idx3-ubyte of shape \(1, 27, 28\)$]=])
dt_cli_reject(csv_columns_pair 1
  [=[^dtrain: data: the test set .*/test\.csv has samples of shape \(50\), the training set .*/train\.csv of shape \(1\)$]=])
dt_cli_reject(csv_test_label_range 1
  [=[^dtrain: csv: .*/test\.csv:2:9: label 5 is not below 3$]=])

# CSV files (file:line:column).
dt_cli_reject(csv_bad_field 1
  [=[^dtrain: csv: .*/train\.csv:3:5: field 2 "4\.5e" is not a finite float$]=])
dt_cli_reject(csv_ragged 1
  [=[^dtrain: csv: .*/train\.csv:3: 2 fields, expected 3 as on line 1$]=])
dt_cli_reject(csv_label_range 1
  [=[^dtrain: csv: .*/train\.csv:2:9: label 3 is not below 3$]=])

# Config files (file:line), --set and the command line.
dt_cli_reject(config_unknown_key 1
  [=[^dtrain: config: .*/c\.ini:4: unknown key 'train\.epochz' \(did you mean train\.epochs\?\)$]=])
dt_cli_reject(config_unknown_section 1
  [=[^dtrain: config: .*/c\.ini:1: unknown section \[training\]]=])
dt_cli_reject(config_bad_value 1
  [=[^dtrain: config: .*/c\.ini:5: optim\.lr: 'fast' is not a number$]=])
dt_cli_reject(config_bad_layer 1
  [=[^dtrain: config: .*/c\.ini:2: model\.layers: layer 3: .*unknown layer kind 'lstm']=])
dt_cli_reject(config_syntax 1
  [=[^dtrain: config: .*/c\.ini:3: 'this line has no equals sign' is not 'key = value']=])
dt_cli_reject(config_missing 1
  [=[^dtrain: config: .*/no-such-config\.ini: cannot open: No such file or directory$]=])
dt_cli_reject(set_unknown_key 2
  [=[^dtrain: config: --set: unknown key 'train\.epoch' \(did you mean train\.epochs\?\)$]=])
dt_cli_reject(set_bad_value 2
  [=[^dtrain: config: --set: data\.shuffle: 'sometimes' is not a boolean]=])
dt_cli_reject(set_no_equals 2
  [=[^dtrain: config: --set: 'train\.epochs' is not section\.key=value$]=])
dt_cli_reject(shorthand_bad_value 2
  [=[^dtrain: config: --batch: train\.batch: -4 is out of range]=])
dt_cli_reject(unknown_option 2
  [=[^dtrain train: unknown option '--epoch' \(see dtrain train --help\)$]=])
dt_cli_reject(option_needs_value 2
  [=[^dtrain train: option --epochs needs a value \(N\)$]=])
dt_cli_reject(unknown_command 2 [=[^dtrain: unknown command 'fit'$]=])

# safetensors files given to --init-weights (the message names the tensor).
dt_cli_reject(st_bad_offsets 1
  [=[^dtrain: safetensors: .*/w\.safetensors: tensor '0\.weight': data_offsets \[16, 272\] run past the 100-byte data region$]=])
dt_cli_reject(st_bad_header_len 1
  [=[^dtrain: safetensors: .*/w\.safetensors: header length 65535 runs past the end of the 10-byte file$]=])
dt_cli_reject(st_wrong_shape 1
  [=[^dtrain: weights: .*/w\.safetensors: tensor '0\.weight' has shape \(16, 4\), the model expects \(4, 16\)$]=])
dt_cli_reject(st_wrong_model 1
  [=[^dtrain: weights: .*/mlp_init\.safetensors: tensor '1\.weight' has shape \(128, 784\), the model expects \(64, 784\)$]=])
dt_cli_reject(st_missing_tensor 1
  [=[^dtrain: weights: .*/w\.safetensors: tensor '0\.weight' is missing$]=])
dt_cli_reject(st_wrong_dtype 1
  [=[^dtrain: weights: .*/w\.safetensors: tensor '0\.(weight|bias)' has dtype F64, expected F32$]=])
dt_cli_reject(st_extra_tensor 1
  [=[^dtrain: weights: .*/w\.safetensors: tensor '1\.weight' has no place in the model$]=])
dt_cli_reject(st_nan 1
  [=[^dtrain: weights: .*/w\.safetensors: tensor '0\.weight' holds NaN at element 5$]=])

# A step never holds more samples than the training set.
dt_cli_reject(batch_too_large 1
  [=[^dtrain: train\.batch: 64 samples per step \(batch 64 x 1 ranks x 1 micro-steps\) is more than the 3 training samples. use --batch 3 or less$]=])

# What works: help, metrics, weights out and back in.
dt_add_cli_test(NAME cli_help TIMEOUT 30 COMMAND sh ${DT_CLI_DIR}/help.sh)
dt_add_cli_test(NAME cli_metrics TIMEOUT 60 COMMAND sh ${DT_CLI_DIR}/metrics.sh ${DT_PYTHON3})
dt_add_cli_test(NAME cli_weights_roundtrip TIMEOUT 60
                COMMAND sh ${DT_CLI_DIR}/weights.sh ${DT_PYTHON3} roundtrip)
dt_add_cli_test(NAME cli_weights_fixed TIMEOUT 60
                COMMAND sh ${DT_CLI_DIR}/weights.sh ${DT_PYTHON3} fixed)
# Output paths checked before training; weights kept in a named file when the end fails.
dt_add_cli_test(NAME cli_outputs MPI TIMEOUT 60 COMMAND sh ${DT_CLI_DIR}/outputs.sh)
# dtrain plan's predictions against the formulas it states.
dt_add_cli_test(NAME cli_plan TIMEOUT 60 COMMAND sh ${DT_CLI_DIR}/plan.sh
                EXPECT "plan: all checks passed")
# No silent misconfiguration: an option set explicitly that changes nothing in the run's
# setup is refused naming it, the examples print nothing new, --resume of a missing path
# fails and a directory without a set says what it holds (1 and 2 ranks).
dt_add_cli_test(NAME cli_misconf MPI TIMEOUT 120 COMMAND sh ${DT_CLI_DIR}/misconf.sh
                EXPECT "misconf: all checks passed")
