#!/usr/bin/env bash
# vLLM's kernels compiled on a GPU: the runs recorded in docs/results/vllm-gpu.md.
#   examples/engines/vllm/gpu_run.sh OUT_DIR [WHEEL]
# WHEEL: the vLLM 0.34.0 wheel, or a zip of the six files record.py extracts (default: the
# wheel in ~/.cache/specaccept-engines, downloaded if absent). At V = 128,256 a trace is
# 2.3 MB a round in float16: those runs encode every round and write it to /dev/null, and
# keep their summaries and a sample step of two requests; at V = 64 the traces are kept,
# for `specaccept conform` on any machine. Writes summary.txt, sample-128k-*.jsonl.gz and
# v64-*.jsonl.gz into OUT_DIR.
set -euo pipefail
out="$1"
wheel=(); [ $# -ge 2 ] && wheel=(--wheel "$2")
here="$(dirname "$0")"
mkdir -p "$out"
summary="$out/summary.txt"
record() {  # LABEL ARGS...: one run, its one-line summary appended under its label
    local label="$1"; shift
    echo "$label: $(python "$here/record.py" "${wheel[@]}" "$@")" | tee -a "$summary"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$summary"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
    | tee -a "$summary"
large=(--vocab 128256 --requests 100 --dtype float16)
for rule in standard block; do
    flags=(); [ "$rule" = block ] && flags+=(--block)
    record "128k-$rule" --rounds 10000 "${large[@]}" "${flags[@]}" --out /dev/null
    record "128k-$rule-sample" --rounds 2 --vocab 128256 --requests 2 --dtype float16 \
        "${flags[@]}" --out "$out/sample-128k-$rule.jsonl.gz"
done
record v64-standard --rounds 5000 --out "$out/v64-standard.jsonl.gz"
record v64-block --rounds 5000 --block --out "$out/v64-block.jsonl.gz"
record 128k-mutant --rounds 2000 "${large[@]}" --block --mutant pre-fix-keying --out /dev/null
record 128k-block-greedy --rounds 10000 "${large[@]}" --block --greedy-drafts --out /dev/null
