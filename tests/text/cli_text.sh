#!/bin/sh
# cli_text.sh — `dtrain train` on data.kind text end to end, on a tiny GPT (two blocks with
# dropout, the tied head, clipping): ddp on 2 ranks (also with ZeRO-1
# and accumulation) writes the weights one process does, within the data-parallel tests'
# 1e-5, and trains under each gradient compression mode; a run resumed from a mid-run checkpoint writes the same bytes as an uninterrupted
# one (windows and dropout keyed by step and window); train.eval_every's records in the
# metrics file come after steps 3, 6 and the last (8), and in a run of epochs (linreg) they
# replace the per-epoch evaluation; `dtrain plot` draws the validation
# loss; --windows-out writes the windows each run trains (one process, ddp on 2 ranks, a
# resumed run from its checkpoint's step) as text.h's formula gives them, computed here by
# tests/data/gen_text_windows.py's Philox, and is refused for other data; and the errors
# of a text run reach the user naming the key. A text model's weights files and checkpoint
# say its input is token ids (no image scaling), and an older set still reads; the start-up
# line gives the planned memory beside the design's minimum.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
PY=${1:?usage: cli_text.sh PYTHON3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-text-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$SRC/tests/support/expect.sh"

# A corpus of words, and a tiny per-position model with dropout.
"$PY" - "$tmp/corpus.txt" <<'PYEOF'
import random, sys
r = random.Random(7)
words = "the cat sat on a mat dog ran far and then slept home".split()
open(sys.argv[1], "w").write(" ".join(r.choice(words) for _ in range(2500)) + "\n")
PYEOF
cat >"$tmp/text.ini" <<INI
[data]
kind = text
text_files = $tmp/corpus.txt
[model]
block_size = 16
layers = transformer.wte: embedding 256 16, transformer.wpe: position, dropout 0.1,
    transformer.h: 2 x block 2 p=0.1 attn_p=0.1, transformer.ln_f: layernorm, lm_head
[loss]
kind = cross_entropy
[optim]
kind = adamw
lr = 0.01
clip_norm = 1.0
[schedule]
kind = cosine
[train]
max_steps = 8
eval_every = 3
seed = 3
threads = 1
INI
RUN="$DTRAIN train $tmp/text.ini --no-progress"

# One process, batch 8: the reference, with its metrics.
expect_ok one $RUN --batch 8 --metrics "$tmp/m.jsonl" --save-weights "$tmp/one.st" \
    --windows-out "$tmp/w_one.txt"
# recompute per block: the same bytes.
expect_ok recompute $RUN --batch 8 --recompute block --save-weights "$tmp/rec.st"
if cmp "$tmp/one.st" "$tmp/rec.st"; then
    echo "ok recompute block: bit-exact"
else
    echo "FAIL recompute block: the weights differ from the run without recompute"; fail=1
fi
# ddp on 2 ranks of 4 windows, and with ZeRO-1 and 2 micro-batches of 2.
expect_ok ddp "$MPIRUN" -np 2 $RUN --batch 4 --save-weights "$tmp/ddp.st" \
    --windows-out "$tmp/w_ddp.txt"
expect_ok zero "$MPIRUN" -np 2 $RUN --batch 2 --accumulation 2 --zero 1 \
    --save-weights "$tmp/zero.st"
# gradient compression under ddp trains the GPT as it trains the other models: each mode
# runs to the end with a finite validation loss. (Its weights are not compared: AdamW turns
# fp16's rounding of a near-zero gradient into a step of full size.)
for c in fp16 topk:0.1 powersgd:2; do
    n=compress_$(echo "$c" | tr ':.' '__')
    expect_ok "$n" "$MPIRUN" -np 2 $RUN --batch 4 --compress "$c"
    grep -Eq "val loss [0-9]+\.[0-9]+" "$tmp/$n.out" ||
        { echo "FAIL $n: no finite validation loss:"; tail -3 "$tmp/$n.out"; fail=1; }
done
# tensor parallelism: the blocks split by heads over 2 ranks (2 heads: one each), and over 2 x 2
# with data parallelism is in tests/tp; here the whole text path on 2 ranks of one tp group.
expect_ok tp "$MPIRUN" -np 2 $RUN --batch 8 --tp 2 --save-weights "$tmp/tp.st"
# sequence parallelism: the blocks' LayerNorms, dropouts and residual adds on 8 positions of
# the 16 per rank (their gradients summed over the pair once per step).
expect_ok tp_sp "$MPIRUN" -np 2 $RUN --batch 8 --tp 2 --sequence-parallel \
    --save-weights "$tmp/tp_sp.st"
# pipelines: 2 stages cut between the blocks, the embedding on stage 0 and the tied head on
# stage 1 (its copy of the table summed with the embedding's every step), with 2 micro-batches
# of 4 under 1F1B; and round robin, which puts the head (layer 6) with the embedding (layer 0).
expect_ok pp "$MPIRUN" -np 2 $RUN --batch 4 --pp 2 --micro-batches 2 --pp-schedule 1f1b \
    --save-weights "$tmp/pp.st" --checkpoint-dir "$tmp/ck_pp" --checkpoint-every 4
expect_ok pp_rr "$MPIRUN" -np 2 $RUN --batch 4 --pp 2 --micro-batches 2 \
    --set parallel.pp_split=round_robin --save-weights "$tmp/pp_rr.st"
for v in ddp zero tp tp_sp pp pp_rr; do
    if "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/one.st" "$tmp/$v.st" --atol 1e-5 \
        >"$tmp/cmp_$v.out" 2>&1; then
        echo "ok $v: np 2 weights within 1e-5 of one process"
    else
        echo "FAIL $v: np 2 weights differ from one process's:"; sed 's/^/  /' "$tmp/cmp_$v.out"
        fail=1
    fi
done

# The pipeline's checkpoint holds the tied table once (the embedding's stage writes it):
# resumed under pp it ends on the uninterrupted pp run's bytes, and in one process on the
# same weights within 1e-5.
expect_ok pp_resumed "$MPIRUN" -np 2 $RUN --batch 4 --pp 2 --micro-batches 2 --pp-schedule 1f1b \
    --resume "$tmp/ck_pp/step-000000004" --save-weights "$tmp/pp_res.st"
if cmp "$tmp/pp.st" "$tmp/pp_res.st"; then
    echo "ok pp resume: bit-exact"
else
    echo "FAIL pp resume: the resumed pipeline's weights differ"; fail=1
fi
if "$PY" - "$tmp/ck_pp/step-000000004" <<'PYEOF'; then
import json, os, sys
d = sys.argv[1]
names = []
for f in sorted(os.listdir(d)):
    if f.endswith(".safetensors"):
        with open(os.path.join(d, f), "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            names += [k for k in json.loads(fh.read(n)) if k != "__metadata__"]
count = names.count("transformer.wte.weight")
sys.exit(0 if count == 1 and "lm_head.weight" not in names else 1)
PYEOF
    echo "ok pp checkpoint: transformer.wte.weight once, no lm_head.weight"
else
    echo "FAIL pp checkpoint: the tied table is not there exactly once"; fail=1
fi

# Resume: the checkpoint of step 4 of an 8-step run, resumed, ends on the same bytes.
expect_ok full $RUN --batch 4 --checkpoint-dir "$tmp/ck" --checkpoint-every 4 \
    --save-weights "$tmp/full.st" --windows-out "$tmp/w_full.txt"
expect_ok resumed $RUN --batch 4 --resume "$tmp/ck/step-000000004" \
    --save-weights "$tmp/resumed.st" --windows-out "$tmp/w_resumed.txt"
if cmp "$tmp/full.st" "$tmp/resumed.st"; then
    echo "ok resume: bit-exact"
else
    echo "FAIL resume: the resumed run's weights differ from the uninterrupted run's"; fail=1
fi

# A text model's weights files: its input is token ids, which no scaling applies to, so
# --save-weights and an export of its checkpoint (the same bytes at the same step) say
# "input": "token_ids" and carry no image scaling, and dtrain inspect says so. A set whose
# manifest has the image scaling in its place (every set before text models had a field of
# their own) still verifies and exports, with that scaling, as before.
expect_ok export "$DTRAIN" export "$tmp/ck/step-000000008" "$tmp/export.st"
expect_same export_bytes "$tmp/full.st" "$tmp/export.st"
if "$PY" - "$tmp/one.st" "$tmp/export.st" <<'PYEOF'; then
import json, sys
bad = 0
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        meta = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))["__metadata__"]
    want = {"format": "pt", "producer": "dtrain", "input": "token_ids"}
    if meta != want:
        print(f"FAIL {path}: metadata {meta}, expected {want}")
        bad = 1
sys.exit(bad)
PYEOF
    echo "ok text weights metadata: input token_ids, no image scaling"
else
    fail=1
fi
expect_status inspect_text 0 'input token ids \(no scaling\)' "$DTRAIN" inspect \
    "$tmp/ck/step-000000004"
cp -r "$tmp/ck/step-000000004" "$tmp/old_set"
"$PY" - "$tmp/old_set/manifest.json" <<'PYEOF' || fail=1
import sys, zlib
path = sys.argv[1]
text = open(path).read()
head = '{"crc32":"'
body = text[31:-2].replace('"input":"token_ids"', '"input_mean":0.5,"input_std":0.25')
open(path, "w").write(head + "%08x" % zlib.crc32(body.encode()) + '","manifest":' + body + "}\n")
PYEOF
expect_status inspect_old 0 'input scaling \(x/255 - 0\.5\) / 0\.25' "$DTRAIN" inspect \
    "$tmp/old_set"
expect_ok export_old "$DTRAIN" export "$tmp/old_set" "$tmp/export_old.st"
"$PY" - "$tmp/export_old.st" <<'PYEOF' || fail=1
import json, sys
with open(sys.argv[1], "rb") as fh:
    meta = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))["__metadata__"]
if meta.get("input_mean") != "0.5" or meta.get("input_std") != "0.25" or "input" in meta:
    sys.exit(f"FAIL export of an older set: metadata {meta}, expected its scaling 0.5, 0.25")
print("ok export of an older set: its scaling, as before")
PYEOF
# The start-up line of a GPT in one process: planned memory beside the design's minimum.
if grep -Eq "^dtrain: memory planned [0-9.]+ MB, the design's minimum [0-9.]+ MB \([0-9.]+x\)" \
    "$tmp/one.out"; then
    echo "ok memory line: $(grep -o "memory planned.*x)" "$tmp/one.out")"
else
    echo "FAIL memory line: no 'memory planned ... design's minimum' line in:"
    sed 's/^/  /' "$tmp/one.out"; fail=1
fi

# --windows-out: (file, global batch, first step) -> every line "s o(s, 0) .. o(s, G - 1)"
# for s = first .. 7, o from text.h's formula (seed 3, block 16, n_train = floor(0.9 n)).
"$PY" - "$SRC/tests/data/gen_text_windows.py" "$tmp/corpus.txt" "$tmp/w_one.txt:8:0" \
    "$tmp/w_ddp.txt:8:0" "$tmp/w_full.txt:4:0" "$tmp/w_resumed.txt:4:4" <<'PYEOF' || fail=1
import contextlib, io, math, os, runpy, sys
with contextlib.redirect_stdout(io.StringIO()):  # it prints the unit test's cases
    ref = runpy.run_path(sys.argv[1])
n_train = math.floor((1 - 0.1) * os.path.getsize(sys.argv[2]))
bad = 0
for arg in sys.argv[3:]:
    path, batch, first = arg.rsplit(":", 2)
    batch, first = int(batch), int(first)
    want = [[s] + [ref["offset"](3, s, j, n_train, 16) for j in range(batch)]
            for s in range(first, 8)]
    try:
        got = [[int(x) for x in ln.split()] for ln in open(path) if not ln.startswith("#")]
    except (OSError, ValueError) as e:
        got = "unreadable: %s" % e
    name = os.path.basename(path)
    if got != want:
        print(f"FAIL windows-out {name}: expected steps {first}..7 of {batch} windows:\n"
              f"  expected {want}\n  actual   {got}")
        bad = 1
    else:
        print(f"ok windows-out {name}: steps {first}..7, {batch} windows each, as text.h's formula")
sys.exit(bad)
PYEOF

# The eval records: after steps 3, 6 and 8 (the last), each with the validation loss, bits
# per byte = nats / ln 2, accuracy and tokens/s; the epoch record keeps its fields.
"$PY" - "$tmp/m.jsonl" "$tmp/one.out" <<'PYEOF' || fail=1
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in recs if r.get("event") == "eval"]
steps = [r["step"] for r in ev]
if steps != [3, 6, 8]:
    sys.exit(f"FAIL eval records after steps {steps}, expected [3, 6, 8]")
for r in ev:
    for k in ("train_loss", "test_loss", "bits_per_byte", "test_accuracy", "tokens_per_s"):
        if not isinstance(r.get(k), (int, float)) or not math.isfinite(r[k]):
            sys.exit(f"FAIL eval record of step {r['step']}: {k} = {r.get(k)!r}")
    if abs(r["bits_per_byte"] - r["test_loss"] / math.log(2)) > 1e-9 * r["bits_per_byte"]:
        sys.exit(f"FAIL step {r['step']}: bits_per_byte {r['bits_per_byte']} != test_loss / ln 2")
ep = [r for r in recs if r.get("event") == "epoch"]
if len(ep) != 1 or ep[0]["steps"] != 8 or ep[0]["test_loss"] != ev[-1]["test_loss"]:
    sys.exit(f"FAIL epoch record {ep}: one, of 8 steps, with the last evaluation's test_loss")
lines = [l for l in open(sys.argv[2]) if l.startswith("step ")]
if len(lines) != 3 or "bits/byte" not in lines[0] or "tokens/s" not in lines[0]:
    sys.exit(f"FAIL log: eval lines {lines}")
print("ok eval records after steps", steps)
PYEOF

# eval_every with an image-style run counted in epochs (linreg: 56 steps per epoch, 2
# epochs): evaluations after steps 40, 80 and the last (112) instead of per epoch; the epoch
# records keep their place, the first without a test loss (no evaluation after step 56),
# the second with the evaluation of its last step.
expect_ok linreg "$DTRAIN" train "$SRC/examples/linreg.ini" --epochs 2 --eval-every 40 \
    --threads 1 --no-progress --metrics "$tmp/l.jsonl"
"$PY" - "$tmp/l.jsonl" <<'PYEOF' || fail=1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in recs if r.get("event") == "eval"]
ep = [(r["steps"], r["test_loss"]) for r in recs if r.get("event") == "epoch"]
last = [r for r in recs if r.get("event") == "eval"][-1]["test_loss"]
if steps != [40, 80, 112] or ep != [(56, None), (112, last)]:
    sys.exit(f"FAIL linreg eval_every 40: evaluations after {steps} (expected [40, 80, 112]), "
             f"epoch records (steps, test_loss) {ep} (expected [(56, None), (112, {last})])")
print("ok linreg eval_every: evaluations after", steps, "epoch records", ep)
PYEOF

# dtrain plot draws the validation loss against the step.
expect_ok plot "$DTRAIN" plot "$tmp/m.jsonl" -o "$tmp/curve.svg"
grep -q "validation loss (nats per byte)" "$tmp/curve.svg" 2>/dev/null || { echo "FAIL plot: no validation curve"; fail=1; }

# The errors, each naming the key, as exit status 2 (a usage error) or 1.
expect_status epochs 2 'train\.epochs.*train\.max_steps' $RUN --epochs 2
expect_status no_block 2 'model\.block_size: required' $RUN --set model.block_size=0
expect_status block_idx 2 'model\.block_size \(--set\) has no effect with data\.kind idx' \
    "$DTRAIN" train --set model.block_size=16 --max-steps 1
expect_status too_large 1 'model\.block_size' $RUN --set model.block_size=100000
expect_status windows_idx 2 'windows-out.*data\.kind text' "$DTRAIN" train \
    "$SRC/examples/linreg.ini" --epochs 1 --windows-out "$tmp/w_idx.txt"
[ -e "$tmp/w_idx.txt" ] && { echo "FAIL windows_idx: a refused --windows-out wrote its file"; fail=1; }
expect_status ps 2 'parallel\.strategy ps does not train on data\.kind text' $RUN \
    --strategy ps
expect_status sp_no_tp 2 'sequence-parallel has no effect without tensor parallelism' $RUN \
    --sequence-parallel
expect_status sp_no_block 2 'sequence-parallel has no effect on a model without block layers' \
    "$DTRAIN" train "$SRC/examples/linreg.ini" --epochs 1 --sequence-parallel

# Each rank reads its own files: the same data.text_files naming different bytes on two
# ranks (a working directory each; one byte changed, the size kept) fails every rank, naming
# both corpora; a rank that cannot read its corpus fails every rank with its message.
mkdir -p "$tmp/wa" "$tmp/wb" "$tmp/wc"
cp "$tmp/corpus.txt" "$tmp/wa/corpus.txt"
sed '1s/^the/The/; 1s/^[a-z]/X/' "$tmp/corpus.txt" >"$tmp/wb/corpus.txt"
cmp -s "$tmp/wa/corpus.txt" "$tmp/wb/corpus.txt" && { echo "FAIL corpora: the copies are equal"; fail=1; }
LOCAL="$DTRAIN train $tmp/text.ini --no-progress --max-steps 1 --set data.text_files=corpus.txt"
expect_status corpora_differ 1 \
    "^dtrain: rank 1: data: the ranks read different text corpora from data\.text_files \(\"corpus\.txt\"\): rank 0: [0-9]+ bytes, crc32 [0-9a-f]{8}; rank 1: [0-9]+ bytes, crc32 [0-9a-f]{8}\$" \
    "$MPIRUN" -np 1 -wdir "$tmp/wa" $LOCAL : -np 1 -wdir "$tmp/wb" $LOCAL
expect_status corpus_missing 1 "^dtrain: rank 0: rank 1: text: data\.text_files: corpus\.txt: cannot open" \
    "$MPIRUN" -np 1 -wdir "$tmp/wa" $LOCAL : -np 1 -wdir "$tmp/wc" $LOCAL

# dtrain plan of the tiny GPT on 2 stages: the tied table's gradient summed between them once
# a step (256 x 16 floats: 0.016 MB), beside the activations.
expect_ok plan_pp "$DTRAIN" plan "$tmp/text.ini" --pp 2 --batch 8 --bandwidth 5 --latency 2
grep -q "the tied table's gradient (embedding group) *0.016 MB" "$tmp/plan_pp.out" ||
    { echo "FAIL plan_pp: no row for the tied table's gradient sum:"; \
    sed 's/^/  /' "$tmp/plan_pp.out"; fail=1; }

# dtrain plan's PowerSGD bytes for a GPT are what a run at 2 ranks reports sending: the
# tensors' factors (the blocks' matrices, the tables), from the model's tensor table.
expect_ok psgd_run "$MPIRUN" -np 2 $RUN --batch 4 --max-steps 3 --compress powersgd:2 \
    --metrics "$tmp/psgd.jsonl"
expect_ok psgd_plan "$DTRAIN" plan "$tmp/text.ini" --ranks 2 --batch 4 --compress powersgd:2 \
    --bandwidth 5 --latency 2 --json "$tmp/psgd_plan.jsonl"
if "$PY" - "$tmp/psgd.jsonl" "$tmp/psgd_plan.jsonl" <<'PYEOF'
import json, sys
comm = [json.loads(l) for l in open(sys.argv[1]) if '"event":"comm"' in l]
rows = [json.loads(l) for l in open(sys.argv[2]) if '"group"' in l]
sent, planned = comm[-1]["wire_bytes_per_step"], sum(r["bytes"] for r in rows)
print("  run: %s bytes per step, plan: %s" % (sent, planned))
sys.exit(0 if sent == planned and sent > 0 else 1)
PYEOF
then echo "ok psgd_bytes: dtrain plan's PowerSGD bytes are the run's"
else echo "FAIL psgd_bytes: dtrain plan's PowerSGD bytes differ from the run's"; fail=1
fi

# --explain-layout counts a step's tensor-parallel collectives (batch 8, the 2 blocks): by
# heads 2 all-reduces forward and 2 backward per block; with sequence parallelism 2
# all-gathers and 2 reduce-scatters forward per block, 4 and 2 backward, and nothing at
# either end: a GPT runs on each rank's positions from its embeddings to its logits (the
# parts of the embedding and the head are positions only).
expect_ok explain_tp $RUN --batch 8 --tp 2 --explain-layout
grep -q "forward 4 all-reduces (.*) and 0 all-gathers (.*), backward 4 all-reduces" \
    "$tmp/explain_tp.out" || { echo "FAIL explain_tp: the all-reduces of 2 blocks by heads:"; \
    grep collectives "$tmp/explain_tp.out"; fail=1; }
expect_ok explain_sp $RUN --batch 8 --tp 2 --sequence-parallel --explain-layout
grep -q "forward 0 all-reduces (.*) and 4 all-gathers" "$tmp/explain_sp.out" &&
    grep -q "forward 4 reduce-scatters (.*), backward 8 all-gathers (.*) and 4 reduce-scatters" \
        "$tmp/explain_sp.out" &&
    grep -q "0:1 t0:8 .* 1:2 t8:16" "$tmp/explain_sp.out" &&
    grep -q "^0 .* embe.* t0:8 .* t8:16 " "$tmp/explain_sp.out" &&
    grep -q "lm_head .* t0:8 .* t8:16 " "$tmp/explain_sp.out" &&
    grep -q "the head and the loss work on each rank's positions" "$tmp/explain_sp.out" ||
    { echo "FAIL explain_sp: the collectives or parts under sequence parallelism:"; \
    sed 's/^/  /' "$tmp/explain_sp.out"; fail=1; }

exit $fail
