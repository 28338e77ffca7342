# shellcheck shell=bash
# What every engine's CI stage (examples/engines/*/ci.sh) does alike. A stage sources this
# after setting `engine` (its name in messages), `venv`, `specaccept` and `work`.

prepare_venv() {  # $1: the engine's requirements file
    local t0
    t0=$(date +%s)
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet -r "$1"
    echo "$engine: environment ready in $(($(date +%s) - t0))s"
}

expect_conforms() {  # $1: a trace in $work; its report is left beside it
    "$specaccept" conform "$work/$1.jsonl.gz" > "$work/$1.report" || {
        cat "$work/$1.report"
        echo "$engine: $1 does not conform" >&2
        exit 1
    }
}

expect_failure() {  # $1: a trace in $work, $2: the check that must fail it
    local code
    set +e
    "$specaccept" conform "$work/$1.jsonl.gz" > "$work/$1.report"
    code=$?
    set -e
    if [ "$code" -ne 1 ] || ! grep -q "^$2 *FAIL" "$work/$1.report"; then
        cat "$work/$1.report"
        echo "$engine: $1 should fail $2 (conform exit 1), got exit $code" >&2
        exit 1
    fi
    grep "^$2" "$work/$1.report"
}
