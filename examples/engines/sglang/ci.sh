#!/usr/bin/env bash
# SGLang's CI stage: SGLang 0.5.23's released rejection-sampling chain verifier
# (chain_speculative_sampling_triton, extracted from the pinned wheel) on the CPU under
# Triton's interpreter. The standard rule and block verification must conform over 1,000
# request-rounds each; the kernel handed the drafter's untempered probabilities
# (--mutant untempered-draft-probs) must fail replay under both rules; and the kernel must
# ignore SGLang's acceptance thresholds (a run at 0.9 0.8 records the same rounds as at 1 1).
# Run from the repository root (examples/engines/ci.sh calls it). The Triton port of the
# tree kernel is in no release and has a stage of its own, check_triton_port.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv="${SGLANG_VENV:-${ENGINES_VENV:-.venv-engines-sglang}}"
specaccept="${SPECACCEPT:-.venv/bin/specaccept}"
work="${ENGINES_WORK:-$(mktemp -d)}/sglang"
rounds="${SGLANG_CI_ROUNDS:-1000}"          # each rule
short="${SGLANG_CI_SHORT_ROUNDS:-200}"      # the mutant, each rule
mkdir -p "$work"
t0=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet -r examples/engines/sglang/requirements.txt
echo "sglang: environment ready in $(($(date +%s) - t0))s"
record() { "$venv/bin/python" examples/engines/sglang/record_chain.py "$@"; }

# The first run downloads the wheel and extracts the kernel, before the others start.
record --rounds 40 --out "$work/thresholds-1-1.jsonl" >/dev/null
record --rounds 40 --thresholds 0.9 0.8 --out "$work/thresholds-0.9-0.8.jsonl" >/dev/null
if ! cmp <(tail -n +2 "$work/thresholds-1-1.jsonl") <(tail -n +2 "$work/thresholds-0.9-0.8.jsonl"); then
    echo "sglang: thresholds 0.9 0.8 changed the chain kernel's rounds" >&2
    exit 1
fi
echo "sglang: thresholds (0.9, 0.8) leave every round unchanged (the chain kernel ignores them)"

t1=$(date +%s)
record --rounds "$rounds" --out "$work/standard.jsonl.gz" > "$work/standard.json" &
standard=$!
record --rounds "$rounds" --block --out "$work/block.jsonl.gz" > "$work/block.json" &
block=$!
wait "$standard"
wait "$block"
record --rounds "$short" --mutant untempered-draft-probs --out "$work/mutant.jsonl.gz" \
    > "$work/mutant.json" &
mutant=$!
record --rounds "$short" --block --mutant untempered-draft-probs \
    --out "$work/mutant-block.jsonl.gz" > "$work/mutant-block.json"
wait "$mutant"
echo "sglang: recorded in $(($(date +%s) - t1))s:"
cat "$work"/standard.json "$work"/block.json "$work"/mutant.json "$work"/mutant-block.json

t2=$(date +%s)
for trace in standard block; do
    "$specaccept" conform "$work/$trace.jsonl.gz" > "$work/$trace.report" || {
        cat "$work/$trace.report"; echo "sglang: $trace does not conform" >&2; exit 1; }
    grep "^replay" "$work/$trace.report"
    tail -n 1 "$work/$trace.report"
done
for trace in mutant mutant-block; do
    set +e
    "$specaccept" conform "$work/$trace.jsonl.gz" > "$work/$trace.report"
    code=$?
    set -e
    if [ "$code" -ne 1 ] || ! grep -q "^replay *FAIL" "$work/$trace.report"; then
        cat "$work/$trace.report"
        echo "sglang: $trace (untempered draft probabilities) was not caught by replay" \
             "(exit $code)" >&2
        exit 1
    fi
    grep "^replay" "$work/$trace.report"
done
echo "sglang: checked in $(($(date +%s) - t2))s; stage took $(($(date +%s) - t0))s"
