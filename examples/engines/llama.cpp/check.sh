#!/usr/bin/env bash
# llama.cpp, checked by hand (not part of CI: the one-time build of libllama takes tens of
# minutes on 2 cores). Builds its own virtual environment (requirements.txt plus the
# project, for `specaccept conform` and the MLX forward), then:
#   1. the GGUF demo pair's logits in llama.cpp against the project's MLX forward;
#   2. 1,000 rounds of llama-cpp-python's speculative decoding, which must conform;
#   3. the two planted defects, whose traces must fail the named check.
#
#   examples/engines/llama.cpp/check.sh [WORKDIR]
#
# Environment: LLAMA_CHECK_VENV names a venv to reuse; SPECACCEPT_ENGINE_CACHE the cache
# (default ~/.cache/specaccept-engines), where the sdist is downloaded and built once.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE="$ROOT/examples/engines/llama.cpp"
WORK=${1:-$(mktemp -d)}
VENV=${LLAMA_CHECK_VENV:-$WORK/venv}
mkdir -p "$WORK"
start=$SECONDS
stage() { echo "=== llama.cpp: $* ($((SECONDS - start)) s)"; }

stage "environment in $VENV"
if ! "$VENV/bin/python" -c "import gguf, diskcache, jinja2, specaccept, mlx_lm" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q -r "$HERE/requirements.txt" -e "$ROOT[dev]"
fi
PY="$VENV/bin/python"
CONFORM="$VENV/bin/specaccept conform"

stage "the GGUF pair's logits against MLX's"
"$PY" "$HERE/check_gguf.py"

stage "1,000 rounds must conform"
"$PY" "$HERE/record.py" --rounds 1000 --out "$WORK/llama-1000.jsonl.gz"
$CONFORM "$WORK/llama-1000.jsonl.gz"

expect_failure() {  # $1: trace, $2: the check that must fail
    local status=0
    $CONFORM "$1" > "$1.txt" || status=$?
    cat "$1.txt"
    if [ "$status" -ne 1 ] || ! grep -q "^$2 *FAIL" "$1.txt"; then
        echo "llama.cpp: $1 should fail $2 (conform exit 1), got exit $status" >&2
        exit 1
    fi
}

# At one temperature, where the law check's power is near 1: over the default mix (0.7, 0, 1,
# 1.3) the sharpened and the flattened runs cancel in a pooled histogram, and the sum over
# temperatures fails it (p 2.4e-10 at 1,000 rounds) with a power of only about 0.9 (README,
# "Mutants").
stage "the temperature applied twice must fail the law check"
"$PY" "$HERE/record.py" --rounds 1000 --temperatures 0.7 --mutant temperature-squared \
    --out "$WORK/temperature-squared.jsonl.gz"
expect_failure "$WORK/temperature-squared.jsonl.gz" law
expect_failure "$WORK/temperature-squared.jsonl.gz" replay

stage "a sampler reseeded every round must fail replay"
"$PY" "$HERE/record.py" --rounds 1000 --mutant reseed-each-round \
    --out "$WORK/reseed-each-round.jsonl.gz"
expect_failure "$WORK/reseed-each-round.jsonl.gz" replay

stage "done"
