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
mkdir -p "$work"
t0=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet -r examples/engines/vllm/requirements.txt
echo "vllm: environment ready in $(($(date +%s) - t0))s"
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
    "$specaccept" conform "$work/$trace.jsonl.gz" > "$work/$trace.report" || {
        cat "$work/$trace.report"; echo "vllm: $trace does not conform" >&2; exit 1; }
    tail -n 1 "$work/$trace.report"
done
set +e
"$specaccept" conform "$work/mutant.jsonl.gz" > "$work/mutant.report"
code=$?
set -e
if [ "$code" -ne 1 ] || ! grep -q "^fresh *FAIL" "$work/mutant.report"; then
    cat "$work/mutant.report"
    echo "vllm: the pre-fix keying mutant was not caught by fresh (exit $code)" >&2
    exit 1
fi
grep "^fresh" "$work/mutant.report"
echo "vllm: checked in $(($(date +%s) - t2))s; stage took $(($(date +%s) - t0))s"
