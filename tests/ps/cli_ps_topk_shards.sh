#!/bin/sh
# cli_ps_topk_shards.sh — top-k pushes over 2 servers against the same arithmetic on 1
# (docs/COMPRESSION.md, src/parallel/ps_codec.c). Top-k picks per server shard, so 1 and 2
# servers select alike only where the data make them: here a linear regression on 63
# features of which the first 32 are always 0, so that the weights of server 0's shard
# (parameters 0-31 of 64: W's first 32 columns; W's other 31 and the bias are server 1's)
# get a gradient of exactly 0. At ratio 0.25 each server sends 8 entries: server 0 zeros,
# server 1 the 8 largest of its gradient plus residual; at ratio 0.125 one server sends the
# 8 largest of the whole, the same 8. Every other entry stays in the workers' residuals.
# So 2 workers with 2 servers at 0.25 must write the weights of 2 workers with 1 server at
# 0.125 byte for byte (the servers' sums and SGD steps are element by element). A shard
# that kept its residual in another shard's place would send that residual as server 0's
# gradient and move weights that no gradient reaches.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-pstopk-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$SRC/tests/support/expect.sh"

# 320 samples: 32 zero features, 31 uniform in [-1, 1), a target linear in them plus noise.
awk 'BEGIN {
    srand(7)
    for (j = 0; j < 31; j++) w[j] = 2 * rand() - 1
    for (i = 0; i < 320; i++) {
        line = ""; y = 0.5
        for (j = 0; j < 32; j++) line = line "0,"
        for (j = 0; j < 31; j++) { x = 2 * rand() - 1; y += w[j] * x; line = line sprintf("%.6f,", x) }
        print line sprintf("%.6f", y + 0.1 * (rand() - 0.5))
    }
}' >"$tmp/data.csv"

cat >"$tmp/lin.ini" <<EOF
[data]
kind = csv
train_file = $tmp/data.csv
csv_header = no
csv_targets = -1
test_samples = 64
[model]
layers = linear 1
[loss]
kind = mse
[optim]
kind = sgd
lr = 0.05
[schedule]
kind = constant
[train]
batch = 16
eval = off
EOF
RUN="$tmp/lin.ini --strategy ps --comm-timeout 30 --no-progress --max-steps 12"
expect_ok one_server "$MPIRUN" -np 3 "$DTRAIN" train $RUN --servers 1 --compress topk:0.125 \
    --save-weights "$tmp/one.st"
expect_ok two_servers "$MPIRUN" -np 4 "$DTRAIN" train $RUN --servers 2 --compress topk:0.25 \
    --save-weights "$tmp/two.st"
expect_same two_servers_equal_one "$tmp/one.st" "$tmp/two.st"
# The residual matters: sending everything (no residual) trains otherwise.
expect_ok dense "$MPIRUN" -np 3 "$DTRAIN" train $RUN --servers 1 --save-weights "$tmp/dense.st"
if cmp -s "$tmp/dense.st" "$tmp/one.st"; then
    echo "FAIL topk_not_dense: top-k at 0.125 wrote the uncompressed run's weights"; fail=1
else
    echo "ok topk_not_dense: top-k at 0.125 trains otherwise than uncompressed pushes"
fi

[ $fail -eq 0 ] && echo "cli_ps_topk_shards: all checks passed"
exit $fail
