#!/usr/bin/env bash
# SGLang's CUDA tree kernel on a GPU, random trees at a vocabulary of your choice, checked by
# the streaming `specaccept conform` on the same machine: the runs in
# docs/results/sglang-cuda-vocab.md.
#   examples/engines/sglang/gpu_conform.sh OUT_DIR LABEL TREES VOCAB EXPECT [RECORD_ARGS...]
# WRITERS recorders (default 8) run side by side, each TREES / WRITERS trees with its own
# seed (SEED_BASE + 1 ..., default 0) and run id, into SCRATCH (default /tmp); their traces
# are checked together, the checks' state kept as OUT_DIR/LABEL-state.json.gz (so that
# `conform --merge` reprints the report anywhere), the traces deleted. EXPECT is conform's
# expected exit status (0: conforms, 1: fails). RECORD_ARGS go to record.py (say
# `--cache DIR`, `--thresholds 0.9 0.8`, `--max-nodes 6`). Writes OUT_DIR/LABEL.txt and a
# line to OUT_DIR/summary.txt; exits 1 if the verdict is not the expected one. With
# FINAL_DRAWS=1, final_draws.py first reads each trace (side by side) and writes, to
# OUT_DIR/LABEL-draws.txt, where the kernel and verify_tree part and by how much
# (verify_tree on MLX's CPU, as conform replays it; FINAL_DRAWS_DEVICE=gpu: on MLX's GPU).
set -u
out="$1"; label="$2"; trees="$3"; vocab="$4"; expect="$5"; shift 5
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
scratch="${SCRATCH:-/tmp}"; writers="${WRITERS:-8}"; base="${SEED_BASE:-0}"
specaccept() { PYTHONPATH="$root/impl${PYTHONPATH:+:$PYTHONPATH}" "${CONFORM_PYTHON:-python}" "$root/impl/specaccept_command.py" "$@"; }
mkdir -p "$out"
each=$(( trees / writers )); t0=$(date +%s); traces=(); pids=()
for w in $(seq 1 "$writers"); do
    trace="$scratch/sglang-$label-$w.jsonl"; traces+=("$trace")
    python "$here/record.py" --kernel cuda --trees "$each" --vocab "$vocab" \
        --seed $(( base + w )) --out "$trace" "$@" >> "$out/$label.record.txt" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "$label: a recorder failed" >&2; exit 1; }; done
t1=$(date +%s); bytes=0
for trace in "${traces[@]}"; do bytes=$(( bytes + $(stat -c %s "$trace") )); done
if [ "${FINAL_DRAWS:-0}" = 1 ]; then
    pids=(); parts=()
    for trace in "${traces[@]}"; do
        parts+=("$trace.draws.json")
        PYTHONPATH="$root/impl${PYTHONPATH:+:$PYTHONPATH}" "${CONFORM_PYTHON:-python}" \
            "$here/final_draws.py" "$trace" --out "$trace.draws.json" \
            --device "${FINAL_DRAWS_DEVICE:-cpu}" > /dev/null &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || { echo "$label: final_draws.py failed" >&2; exit 1; }; done
    PYTHONPATH="$root/impl${PYTHONPATH:+:$PYTHONPATH}" "${CONFORM_PYTHON:-python}" \
        "$here/final_draws.py" --sum "${parts[@]}" > "$out/$label-draws.txt"
    cp "${parts[@]}" "$out/" 2>/dev/null; rm -f "${parts[@]}"
    echo "$label: draws compared in $(( $(date +%s) - t1 )) s" | tee -a "$out/summary.txt"
    t1=$(date +%s)
fi
specaccept conform "${traces[@]}" --save-state "$out/$label-state.json.gz" \
    2>> "$out/$label.record.txt" || { echo "$label: conform could not run" >&2; exit 1; }
rm -f "${traces[@]}"
t2=$(date +%s)
specaccept conform --merge "$out/$label-state.json.gz" > "$out/$label.txt"; rc=$?
echo "$label: $(( each * writers )) trees at V = $vocab, $bytes trace bytes, recording" \
     "$(( t1 - t0 )) s, checking $(( t2 - t1 )) s on $(nproc) cores; conform exit $rc" \
     "(expected $expect)" | tee -a "$out/summary.txt"
[ "$rc" -eq "$expect" ]
