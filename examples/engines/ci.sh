#!/usr/bin/env bash
# The engines' CI stage: runs each engine's own stage (examples/engines/*/ci.sh) under one
# time budget. Each stage installs its engine's requirements into a venv of its own, records
# traces with the engine's real kernels, checks them with `specaccept conform` (they must
# conform) and plants the engine's known regressions (the traces must fail).
#
# Usage, from the repository root, with the project's venv built (its `specaccept` checks):
#   examples/engines/ci.sh
# Environment: ENGINES_BUDGET_S (default 720 s for the whole stage), SPECACCEPT (the
# conform command, default .venv/bin/specaccept), ENGINES_WORK (scratch directory),
# ENGINES_VENV (the recorders' environment, default .venv-engines: the engines pin the same
# torch and triton, so one environment serves every stage).
set -euo pipefail
cd "$(dirname "$0")/../.."
export ENGINES_VENV="${ENGINES_VENV:-.venv-engines}"
budget="${ENGINES_BUDGET_S:-720}"
start=$(date +%s)
status=0
for stage in examples/engines/*/ci.sh; do
    left=$((budget - ($(date +%s) - start)))
    if [ "$left" -le 0 ]; then
        echo "engines: out of time before $stage (budget ${budget}s)" >&2
        exit 1
    fi
    echo "=== engines: $stage (${left}s left of ${budget}s)"
    if ! timeout --signal=TERM --kill-after=10 "$left" bash "$stage"; then
        echo "engines: $stage failed or ran out of time" >&2
        status=1
    fi
done
echo "=== engines: done in $(($(date +%s) - start))s, exit $status"
exit $status
