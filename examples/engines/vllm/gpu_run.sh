#!/usr/bin/env bash
# vLLM's kernels compiled on a GPU at V = 128,256: the runs in docs/results/vllm-gpu.md.
#   examples/engines/vllm/gpu_run.sh OUT_DIR [WHEEL]
# WHEEL: the vLLM 0.34.0 wheel, or a zip of the six files record.py extracts (default: the
# wheel in ~/.cache/specaccept-engines, downloaded if absent). A trace at V = 128,256 is
# 5.8 MB a round, so these runs keep no trace (--summary-only): each prints its summary
# (acceptance, seconds in the kernels, recorded coins equal to an earlier one). Then two
# traces at V = 64, for `specaccept conform` on any machine. Appends to OUT_DIR/summary.txt.
set -u
out="$1"
wheel=(); [ $# -ge 2 ] && wheel=(--wheel "$2")
here="$(dirname "$0")"
mkdir -p "$out"
record() {  # LABEL ARGS...: one run, its summary line appended under its label
    local label="$1"; shift
    echo "$label: $(python "$here/record.py" "${wheel[@]}" "$@" 2>&1 | tail -n 1)" \
        | tee -a "$out/summary.txt"
}
large=(--vocab 128256 --requests 100 --summary-only)
record 128k-standard --rounds 10000 "${large[@]}"
record 128k-block --rounds 10000 "${large[@]}" --block
record 128k-mutant --rounds 2000 "${large[@]}" --block --mutant pre-fix-keying
record v64-standard --rounds 2000 --out "$out/v64-standard.jsonl.gz"
record v64-block --rounds 2000 --block --out "$out/v64-block.jsonl.gz"
