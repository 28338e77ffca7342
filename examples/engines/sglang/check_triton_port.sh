#!/usr/bin/env bash
# The SGLang stage of CI: SGLang's Triton port, run on the CPU under Triton's interpreter,
# recorded and checked by `specaccept conform`. A correct verifier conforms; the planted
# mutant (thresholds below 1, SGLang's lossy setting) and the port's p = 0 acceptance fail.
# Its own virtual environment (requirements.txt plus the project; SGLANG_CI_VENV names one to
# reuse), then about 5 minutes on 2 cores.
#
#   examples/engines/sglang/check_triton_port.sh [WORKDIR]
#
# Needs the pinned Triton port at record.py's --triton-source default (README: "Files").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE="$ROOT/examples/engines/sglang"
WORK=${1:-$(mktemp -d)}
VENV=${SGLANG_CI_VENV:-$WORK/venv}
mkdir -p "$WORK"
start=$SECONDS
stage() { echo "=== sglang: $* ($((SECONDS - start)) s)"; }

stage "environment in $VENV"
if ! "$VENV/bin/python" -c "import torch, triton, specaccept, scipy, tqdm" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q -r "$HERE/requirements.txt"
    # conform needs the project, SciPy and tqdm; not mlx-lm
    "$VENV/bin/pip" install -q -e "$ROOT" "scipy>=1.11" "tqdm>=4.66"
fi
PY="$VENV/bin/python"
CONFORM="$VENV/bin/specaccept conform"

stage "the port on 1,000 random trees must conform"
"$PY" "$HERE/record.py" --trees 1000 --out "$WORK/triton-1000.jsonl"
$CONFORM "$WORK/triton-1000.jsonl"

expect_failure() {  # $1: trace, $2: the check that must fail
    local status=0
    $CONFORM "$1" > "$1.txt" || status=$?
    cat "$1.txt"
    if [ "$status" -ne 1 ] || ! grep -q "^$2 *FAIL" "$1.txt"; then
        echo "sglang: $1 should fail $2 (conform exit 1), got exit $status" >&2
        exit 1
    fi
}

stage "planted mutant: thresholds (0.9, 0.8) on 600 trees must fail tree-acceptance"
"$PY" "$HERE/record.py" --trees 600 --thresholds 0.9 0.8 --seed 1 --out "$WORK/mutant.jsonl"
expect_failure "$WORK/mutant.jsonl" tree-acceptance

stage "the port's zero-mass acceptance (SGLang's fixed case) must fail tree-support"
"$PY" "$HERE/record.py" --fixed-cases --case zero-mass-child-threshold-1 \
    --out "$WORK/zero-mass.jsonl"
expect_failure "$WORK/zero-mass.jsonl" tree-support

stage "passed"
