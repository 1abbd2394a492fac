#!/bin/sh
# generate.sh FIXTURE PYTHON CASE — dtrain generate and dtrain export --format hf on the tiny
# GPT that FIXTURE (tests/infer/gpt_fixture.c) writes: block_size 16, 2 blocks.
#
#   run      the checkpoint, the weights file and the export to a Hugging Face directory
#            give the same greedy bytes; one seed gives the same sampled bytes twice; the
#            --logits file's tokens are the bytes printed; 40 bytes from a 5-byte prompt go
#            past block_size, and bytes 11, 20 and 39 (context full, sliding) are each what a
#            one-byte generation from the last 16 bytes before them gives; a 24-byte prompt
#            is cut from the left (stderr says so) and continues as its last 16 bytes do.
#   export   export --format hf writes DIR/model.safetensors holding exactly
#            GPT2LMHeadModel's tensor names (no lm_head.weight, no optimizer state) with
#            metadata format pt, and DIR/config.json that parses with the sizes and the keys
#            from_pretrained reads; a model that is not a GPT, or a GPT whose layers are
#            not named as Hugging Face's modules, is refused naming why.
#   errors   each bad option or source is refused with its own message and status.
set -u
FIXTURE=${1:?usage: generate.sh FIXTURE PYTHON CASE}
PY=${2:?usage: generate.sh FIXTURE PYTHON CASE}
CASE=${3:?usage: generate.sh FIXTURE PYTHON CASE}
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$SRC/tests/cli/runner.sh"

"$FIXTURE" "$tmp" || { echo "FAIL: $FIXTURE $tmp"; exit 1; }
ckpt=$tmp/ckpt
weights=$tmp/gpt.safetensors
ini=$tmp/gpt.ini

# same NAME_A NAME_B WHAT: the two runs printed the same bytes.
same() {
    if ! cmp -s "$tmp/$1.out" "$tmp/$2.out"; then
        echo "FAIL: $3: '$1' printed $(od -An -tu1 "$tmp/$1.out" | tr -s ' \n' ' '), '$2'" \
             "$(od -An -tu1 "$tmp/$2.out" | tr -s ' \n' ' ')"
        fail=1
    fi
}

# refuse NAME CODE REGEX ARGS...: dtrain ARGS exits CODE with a stderr line matching REGEX.
refuse() {
    name=$1 code=$2 regex=$3
    shift 3
    "$DTRAIN" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    got=$?
    echo "\$ dtrain $*: exit status $got"
    sed 's/^/  /' "$tmp/$name.err"
    if [ $got -ne "$code" ]; then
        echo "FAIL: $name: exit status $got, expected $code"
        fail=1
    fi
    if ! grep -Eq -- "$regex" "$tmp/$name.err"; then
        echo "FAIL: $name: no stderr line matches: $regex"
        fail=1
    fi
}

case $CASE in
run)
    g="--prompt Hello --tokens 40 --temperature 0"
    # shellcheck disable=SC2086 # g is a list of words
    run ckpt generate "$ckpt" $g --logits "$tmp/l.safetensors"
    # shellcheck disable=SC2086
    run weights generate "$weights" --config "$ini" $g
    run export export "$ckpt" "$tmp/hf" --format hf
    # shellcheck disable=SC2086
    run hf generate "$tmp/hf" --config "$ini" $g
    same ckpt weights "the checkpoint and the weights file"
    same ckpt hf "the checkpoint and its export to a Hugging Face directory"
    n=$(wc -c <"$tmp/ckpt.out")
    if [ "$n" -ne 40 ]; then
        echo "FAIL: --tokens 40 printed $n bytes"
        fail=1
    fi
    "$PY" - "$tmp/l.safetensors" "$tmp/ckpt.out" <<'EOF' || fail=1
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
t = h["tokens"]
lo, hi = t["data_offsets"]
tokens = list(struct.unpack(f"<{(hi - lo) // 4}i", raw[8 + n + lo:8 + n + hi]))
printed = list(open(sys.argv[2], "rb").read())
print(f"--logits: tokens {tokens[:8]}..., step_logits {h['step_logits']['shape']}, "
      f"prompt_logits {h['prompt_logits']['shape']}")
if tokens != printed:
    sys.exit(f"FAIL: the --logits file's tokens {tokens} are not the bytes printed {printed}")
if h["step_logits"]["shape"] != [40, 256] or h["prompt_logits"]["shape"] != [5, 256]:
    sys.exit("FAIL: expected step_logits (40, 256) and prompt_logits (5, 256)")
EOF
    # Past block_size: byte i is a one-byte generation from the 16 bytes before it.
    printf 'Hello' >"$tmp/all"
    cat "$tmp/ckpt.out" >>"$tmp/all"
    for i in 11 20 39; do
        # The context as an argument, its bytes through printf's octal escapes (POSIX sh has
        # no \x); a NUL or a trailing newline would change it, and the check fail loudly.
        arg=$(head -c $((5 + i)) "$tmp/all" | tail -c 16 | od -An -to1 -v |
              tr -s ' \n' ' ' | sed 's/^ //; s/ $//; s/ /\\/g; s/^/\\/')
        run "one$i" generate "$ckpt" --prompt "$(printf "$arg")" --tokens 1 --temperature 0
        tail -c +$((i + 1)) "$tmp/ckpt.out" | head -c 1 >"$tmp/want$i.out"
        same "one$i" "want$i" "byte $i of 40 (context full from byte 11: the last 16 bytes)"
    done
    # Sampling: one seed twice, the same bytes.
    run s1 generate "$ckpt" --prompt Hello --tokens 30 --seed 9 --top-k 20 --temperature 0.8
    run s2 generate "$ckpt" --prompt Hello --tokens 30 --seed 9 --top-k 20 --temperature 0.8
    same s1 s2 "seed 9 twice"
    # A prompt longer than block_size: cut from the left, said on stderr.
    run long generate "$ckpt" --prompt "0123456789abcdefghijklmn" --tokens 8 --temperature 0
    if ! grep -q "the prompt's 24 bytes are more than block_size 16: it is cut from the left to its last 16" "$tmp/long.err"; then
        echo "FAIL: a 24-byte prompt is not said to be cut"
        fail=1
    fi
    run tail generate "$ckpt" --prompt "89abcdefghijklmn" --tokens 8 --temperature 0
    same long tail "a 24-byte prompt and its last 16 bytes"
    ;;
export)
    run export export "$ckpt" "$tmp/hf" --format hf
    "$PY" - "$tmp/hf" <<'EOF' || fail=1
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
want = {"vocab_size": 256, "n_positions": 16, "n_ctx": 16, "n_embd": 32, "n_layer": 2,
        "n_head": 4, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": True, "resid_pdrop": 0.1, "embd_pdrop": 0.05, "attn_pdrop": 0.2,
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}
for k, v in want.items():
    if cfg.get(k) != v:
        sys.exit(f"FAIL: config.json: {k} is {cfg.get(k)!r}, expected {v!r}")
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__", {})
names = sorted(h)
block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
         "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
         "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
hf = sorted(["transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
             "transformer.ln_f.bias"] + [f"transformer.h.{i}.{s}" for i in range(2) for s in block])
print(f"config.json: {len(cfg)} keys; model.safetensors: {len(names)} tensors, metadata {meta}")
if names != hf:
    sys.exit(f"FAIL: model.safetensors holds {names}\n  GPT2LMHeadModel's names are {hf}\n"
             f"  missing {sorted(set(hf) - set(names))}, extra {sorted(set(names) - set(hf))}")
if meta.get("format") != "pt":
    sys.exit(f"FAIL: metadata {meta}: transformers needs format pt")
if h["transformer.h.0.attn.c_attn.weight"]["shape"] != [32, 96]:
    sys.exit("FAIL: c_attn.weight is not Conv1D's (in, out) = (32, 96)")
EOF
    refuse export_mlp 1 '^dtrain export --format hf: .*/ckpt_mlp/step-000000007/config\.ini: model\.layers: not a GPT: no lm_head layer' \
        export "$tmp/ckpt_mlp" "$tmp/hf2" --format hf
    refuse export_named 1 "^dtrain export: --format hf: .*/ckpt_named/step-000000007/config\.ini: the layers are not named as GPT2LMHeadModel's modules .*layer 0 is named 'wte'" \
        export "$tmp/ckpt_named" "$tmp/hf3" --format hf
    if [ -e "$tmp/hf2" ] || [ -e "$tmp/hf3" ]; then
        echo "FAIL: a refused export left its directory behind"
        fail=1
    fi
    ;;
errors)
    refuse tokens0 2 '^dtrain generate: --tokens: 0 must be in \[1, ' \
        generate "$ckpt" --prompt Hi --tokens 0
    refuse tokens_neg 2 '^dtrain generate: --tokens: -3 must be in \[1, ' \
        generate "$ckpt" --prompt Hi --tokens -3
    refuse tokens_text 2 "^dtrain generate: --tokens: 'many' is not an integer" \
        generate "$ckpt" --prompt Hi --tokens many
    refuse temp_neg 2 "^dtrain generate: --temperature: '-0\.5' must be a number >= 0 \(0 is greedy\)" \
        generate "$ckpt" --prompt Hi --tokens 2 --temperature -0.5
    refuse temp_nan 2 "^dtrain generate: --temperature: 'nan' must be a number >= 0" \
        generate "$ckpt" --prompt Hi --tokens 2 --temperature nan
    refuse topk0 2 '^dtrain generate: --top-k: 0 must be in \[1, 256\]' \
        generate "$ckpt" --prompt Hi --tokens 2 --top-k 0
    refuse topk257 2 '^dtrain generate: --top-k: 257 must be in \[1, 256\]' \
        generate "$ckpt" --prompt Hi --tokens 2 --top-k 257
    # Greedy decoding (--temperature 0) and --top-k 1 draw nothing: what only shapes a draw
    # has no effect there and is refused.
    refuse greedy_seed 2 '^dtrain generate: --seed has no effect with --temperature 0: greedy decoding' \
        generate "$ckpt" --prompt Hi --tokens 2 --temperature 0 --seed 3
    refuse greedy_topk 2 '^dtrain generate: --top-k has no effect with --temperature 0' \
        generate "$ckpt" --prompt Hi --tokens 2 --temperature 0 --top-k 5
    refuse top1_temperature 2 '^dtrain generate: --temperature has no effect with --top-k 1: the most likely byte is the only one left' \
        generate "$ckpt" --prompt Hi --tokens 2 --top-k 1 --temperature 0.5
    refuse empty 2 '^dtrain generate: --prompt: the prompt is empty' \
        generate "$ckpt" --prompt "" --tokens 2
    refuse no_prompt 2 '^dtrain generate: --prompt TEXT is required' generate "$ckpt" --tokens 2
    refuse no_config 2 '^dtrain generate: .*/gpt\.safetensors: --config CONFIG is needed' \
        generate "$weights" --prompt Hi --tokens 2
    refuse not_gpt 1 '^dtrain generate: --config .*/mlp\.ini: model\.layers: not a GPT: no lm_head layer' \
        generate "$weights" --config "$tmp/mlp.ini" --prompt Hi --tokens 2
    printf '[model]\nlayers = embedding 256 32, position, layernorm, lm_head\n' >"$tmp/noblock.ini"
    refuse no_blocks 1 '^dtrain generate: --config .*/noblock\.ini: model\.layers: not a GPT: no block layers' \
        generate "$weights" --config "$tmp/noblock.ini" --prompt Hi --tokens 2
    { printf '[data]\nkind = text\n[model]\nblock_size = 8\n'; grep -A3 '^layers' "$tmp/gpt.ini"; } \
        >"$tmp/bs8.ini"
    refuse block_size 2 "^dtrain generate: .*/bs8\.ini: model\.block_size is 8, but the source's position table has 16 rows" \
        generate "$weights" --config "$tmp/bs8.ini" --prompt Hi --tokens 2
    refuse missing 1 "^dtrain generate: $tmp/nowhere: No such file or directory" \
        generate "$tmp/nowhere" --prompt Hi --tokens 2
    refuse format 2 "^dtrain export: --format: 'onnx' is not safetensors or hf" \
        export "$ckpt" "$tmp/x" --format onnx
    # Output paths: one that cannot be written fails before any byte is generated; an empty
    # one is named as such (it used to end as "cannot rename .tmp... over it").
    refuse logits_nodir 1 "^dtrain: generate --logits: $tmp/nowhere/l\.st: cannot be written: No such file" \
        generate "$ckpt" --prompt Hi --tokens 2 --logits "$tmp/nowhere/l.st"
    if [ -s "$tmp/logits_nodir.out" ]; then
        echo "FAIL logits_nodir: bytes were generated before the refusal:"
        sed 's/^/  /' "$tmp/logits_nodir.out"; fail=1
    fi
    refuse logits_empty 1 "^dtrain: generate --logits: the output path is empty" \
        generate "$ckpt" --prompt Hi --tokens 2 --logits ""
    refuse export_empty 1 "^dtrain: safetensors: the output path is empty" export "$ckpt" ""
    ;;
*)
    echo "generate.sh: unknown case $CASE"
    exit 2
    ;;
esac
[ $fail -eq 0 ] && echo "ok: generate $CASE"
exit $fail
