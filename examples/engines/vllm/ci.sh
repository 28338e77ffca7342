#!/usr/bin/env bash
# vLLM's CI stage: vLLM 0.34.0's verification kernels, from the pinned wheel, on the CPU
# (Triton's interpreter). The standard rule and block verification must conform over 1,000
# request-rounds each; block verification with the coins keyed as before the fix
# (--mutant pre-fix-keying) must fail `fresh`; the interpreter speed-up must not change a
# byte of a trace. Run from the repository root (examples/engines/ci.sh calls it).
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv="${VLLM_VENV:-${ENGINES_VENV:-.venv-engines-vllm}}"
specaccept="${SPECACCEPT:-.venv/bin/specaccept}"
work="${ENGINES_WORK:-$(mktemp -d)}/vllm"
rounds="${VLLM_CI_ROUNDS:-1000}"            # each rule
short="${VLLM_CI_SHORT_ROUNDS:-300}"        # greedy drafts, and the mutant
engine=vllm
# shellcheck source=examples/engines/stage.sh
. examples/engines/stage.sh
mkdir -p "$work"
t0=$(date +%s)
prepare_venv examples/engines/vllm/requirements.txt
record() { "$venv/bin/python" examples/engines/vllm/record.py "$@"; }

# The wheel is downloaded once (the first run), before the two recorders start together.
record --rounds 8 --out "$work/plain.jsonl" --plain-interpreter >/dev/null
record --rounds 8 --out "$work/fast.jsonl" >/dev/null
cmp "$work/plain.jsonl" "$work/fast.jsonl"
echo "vllm: the interpreter speed-up leaves the trace byte-identical"

t1=$(date +%s)
record --rounds "$rounds" --out "$work/standard.jsonl.gz" > "$work/standard.json" &
standard=$!
record --rounds "$rounds" --block --out "$work/block.jsonl.gz" > "$work/block.json" &
block=$!
wait "$standard"
wait "$block"
record --rounds "$short" --block --greedy-drafts --out "$work/block-greedy.jsonl.gz" \
    > "$work/block-greedy.json" &
greedy=$!
record --rounds "$short" --block --mutant pre-fix-keying --out "$work/mutant.jsonl.gz" \
    > "$work/mutant.json"
wait "$greedy"
echo "vllm: recorded in $(($(date +%s) - t1))s:"
cat "$work"/standard.json "$work"/block.json "$work"/block-greedy.json "$work"/mutant.json

t2=$(date +%s)
for trace in standard block block-greedy; do
    expect_conforms "$trace"
    tail -n 1 "$work/$trace.report"
done
expect_failure mutant fresh   # block verification with the pre-fix keying
echo "vllm: checked in $(($(date +%s) - t2))s; stage took $(($(date +%s) - t0))s"
