#!/usr/bin/env bash
# vLLM's kernels compiled on a GPU at V = 128,256, every trace checked by the streaming
# `specaccept conform` on the same machine: the runs in docs/results/vllm-gpu-conform.md.
#   examples/engines/vllm/gpu_conform.sh OUT_DIR RULE ROUNDS [WHEEL [SCRATCH]]
# RULE: standard, block, or mutant (block verification with vLLM's keying before 0.33,
# which must FAIL). ROUNDS request-rounds are recorded in 4 batches of 4 recorders running
# side by side (each its own seed and run ids, 100 requests a step); each batch's 4 traces
# are checked together (`conform A B C D --save-state`), then deleted, so the disk holds one
# batch (5.8 MB a request-round in float32: about 14.6 GB for 2,500 request-rounds); the
# batches' states are merged into one report (`conform --merge`). WHEEL: the vLLM 0.34.0
# wheel, or a zip of the six files record.py extracts. SCRATCH: where traces go (/tmp).
# VOCAB and REQUESTS in the environment override 128,256 and 100 (for a trial run);
# CONFORM_PYTHON, the Python that runs `conform` (default: python, as the recorders);
# BATCHES and WRITERS override the 4 batches of 4 recorders.
# Writes OUT_DIR/RULE.txt (the report) and a line to OUT_DIR/summary.txt; exits 1 if the
# verdict is not the expected one.
set -u
out="$1"; rule="$2"; rounds="$3"
wheel=(); [ $# -ge 4 ] && wheel=(--wheel "$4")
scratch="${5:-/tmp}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
specaccept() { PYTHONPATH="$root/impl${PYTHONPATH:+:$PYTHONPATH}" "${CONFORM_PYTHON:-python}" "$root/impl/specaccept_command.py" "$@"; }
case "$rule" in
    standard) flags=(); expect=0 ;;
    block) flags=(--block); expect=0 ;;
    mutant) flags=(--block --mutant pre-fix-keying); expect=1 ;;
    *) echo "gpu_conform.sh: RULE must be standard, block or mutant, got '$rule'" >&2; exit 2 ;;
esac
batches="${BATCHES:-4}"; writers="${WRITERS:-4}"
each=$(( rounds / (batches * writers) ))
mkdir -p "$out"
started=$(date +%s); recording=0; checking=0; bytes=0
states=()
for b in $(seq 1 $batches); do
    t0=$(date +%s); traces=(); pids=()
    for w in $(seq 1 $writers); do
        trace="$scratch/vllm-$rule-$b-$w.jsonl"; traces+=("$trace")
        python "$here/record.py" "${wheel[@]}" "${flags[@]}" --rounds "$each" --vocab "${VOCAB:-128256}" \
            --requests "${REQUESTS:-100}" --seed $(( 1000 * b + w )) --run-prefix "b$b-w$w-" --out "$trace" \
            >> "$out/$rule.record.txt" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || { echo "$rule: a recorder failed" >&2; exit 1; }; done
    t1=$(date +%s)
    for trace in "${traces[@]}"; do bytes=$(( bytes + $(stat -c %s "$trace") )); done
    state="$out/$rule-state-$b.json.gz"
    specaccept conform "${traces[@]}" --save-state "$state" 2>> "$out/$rule.record.txt" \
        || { echo "$rule: conform on batch $b could not run" >&2; exit 1; }
    rm -f "${traces[@]}"
    states+=("$state")
    t2=$(date +%s)
    recording=$(( recording + t1 - t0 )); checking=$(( checking + t2 - t1 ))
done
specaccept conform --merge "${states[@]}" > "$out/$rule.txt"; rc=$?
echo "$rule: $(( each * batches * writers )) request-rounds, $bytes trace bytes, recording" \
     "$recording s, checking $checking s on $(nproc) cores, total $(( $(date +%s) - started )) s;" \
     "conform exit $rc (expected $expect)" | tee -a "$out/summary.txt"
[ "$rc" -eq "$expect" ]
