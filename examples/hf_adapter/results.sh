#!/usr/bin/env bash
# Rerun every recorded result of the transformers adapter and write them to docs/results/:
# the logit comparison, the soaks of unmodified transformers at temperatures 0.7 and 1.0
# (and 1.0 with top-k and top-p), one soak per injected bug, and one wrongly recorded.
# Each file opens with the commands that produced it. Run from the repository root, in a
# venv made by the first command below; traces go to $TRACES (default: a fresh temporary
# directory).
#
#   bash examples/hf_adapter/results.sh
set -euo pipefail
PY=.venv/bin/python
TRACES=${TRACES:-$(mktemp -d)}
INSTALL="python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/pip install -q -r examples/hf_adapter/requirements.txt"
OUT=docs/results

versions() {  # what ran the adapter; with "mlx", also what it was compared with
  local extra=""
  if [ "${1:-}" = mlx ]; then
    extra="+ f', mlx {version(\"mlx\")}, mlx-lm {version(\"mlx-lm\")}'"
  fi
  $PY -c "import platform, torch, transformers; from importlib.metadata import version; print(f'torch {torch.__version__}, transformers {transformers.__version__}' $extra + f', Python {platform.python_version()}, {platform.machine()}')"
}

# The logits of the converted pair against mlx-lm's.
{
  printf 'Produced by:\n\n```sh\n%s\n.venv/bin/python examples/hf_adapter/hf_compare_logits.py\n```\n\n' "$INSTALL"
  printf '%s\n\n```text\n' "$(versions mlx)"
  $PY examples/hf_adapter/hf_compare_logits.py
  printf '```\n'
} > "$OUT/hf-compare-logits.md"

# One soak: record it (this process imports neither mlx nor specaccept), then check it.
soak() {  # name, then the recorder's arguments
  local name=$1; shift
  local trace="$TRACES/$name.jsonl.gz"
  local record="$PY examples/hf_adapter/hf_trace.py $name.jsonl.gz $*"
  {
    printf 'Produced by:\n\n```sh\n%s\n%s\n.venv/bin/specaccept conform %s.jsonl.gz\n```\n\n' \
      "$INSTALL" "$record" "$name"
    printf '%s\n\n```text\n' "$(versions)"
    $PY examples/hf_adapter/hf_trace.py "$trace" "$@" 2>&1 \
      | grep -v '^\[transformers\] Passing `generation_config`' | sed "s|$TRACES/||"
    printf '```\n\n```text\n'
    .venv/bin/specaccept conform "$trace" || true  # a bug's trace exits 1: that is the result
    printf '```\n'
  } > "$OUT/$name.md"
}

soak conform-hf-t0.7 --temp 0.7 --runs 200 --max-new-tokens 48
soak conform-hf-t1.0 --temp 1.0 --runs 200 --max-new-tokens 48
soak conform-hf-t1.0-topk20-topp0.9 --temp 1.0 --top-k 20 --top-p 0.9 --runs 100 --max-new-tokens 48
for bug in resample-from-p raw-logits-q reused-uniforms; do
  soak "conform-hf-bug-$bug" --temp 0.7 --runs 60 --max-new-tokens 48 --bug "$bug"
done
# transformers unmodified, the adapter wrong: q recorded before the temperature.
soak conform-hf-misrecorded-q --temp 0.7 --runs 60 --max-new-tokens 48 --misrecord-q
echo "traces in $TRACES"
