#!/usr/bin/env bash
# SGLang's CI stage: SGLang 0.5.23's released rejection-sampling chain verifier
# (chain_speculative_sampling_triton, extracted from the pinned wheel) on the CPU under
# Triton's interpreter. The standard rule and block verification must conform over 1,000
# request-rounds each; the kernel handed the drafter's untempered probabilities
# (--mutant untempered-draft-probs) must fail replay under both rules, one coin for every draft
# of a block round (--mutant shared-coin) must fail fresh; and the kernel must
# ignore SGLang's acceptance thresholds (a run at 0.9 0.8 records the same rounds as at 1 1).
# SGLang's greedy verifier (verify_tree_greedy_triton, the path eagle_sample takes on CPU and
# XPU for every request) must conform on greedy requests (1,000 random trees) and fail the
# law check on sampled ones (docs/results/sglang-cpu-greedy-commit.md); greedy trees whose rows
# torch drew a batch at a time (`record.py --rows torch`, the CUDA recorder's default) must
# conform too.
# Run from the repository root (examples/engines/ci.sh calls it). The Triton port of the
# tree kernel is in no release and has a stage of its own, check_triton_port.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv="${SGLANG_VENV:-${ENGINES_VENV:-.venv-engines-sglang}}"
specaccept="${SPECACCEPT:-.venv/bin/specaccept}"
work="${ENGINES_WORK:-$(mktemp -d)}/sglang"
rounds="${SGLANG_CI_ROUNDS:-1000}"          # each rule
short="${SGLANG_CI_SHORT_ROUNDS:-200}"      # the mutant, each rule
engine=sglang
# shellcheck source=examples/engines/stage.sh
. examples/engines/stage.sh
mkdir -p "$work"
t0=$(date +%s)
prepare_venv examples/engines/sglang/requirements.txt
record() { "$venv/bin/python" examples/engines/sglang/record_chain.py "$@"; }
record_trees() { "$venv/bin/python" examples/engines/sglang/record.py "$@"; }

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
record --rounds "$short" --block --mutant shared-coin --out "$work/shared-coin.jsonl.gz" \
    > "$work/shared-coin.json"
record_trees --kernel greedy-triton --trees "$rounds" --out "$work/greedy-trees.jsonl.gz" \
    > "$work/greedy-trees.json" 2> "$work/greedy-trees.err" &
trees=$!
record_trees --kernel greedy-triton --sampled --trees "$short" \
    --out "$work/greedy-trees-sampled.jsonl.gz" > "$work/greedy-trees-sampled.json" \
    2> "$work/greedy-trees-sampled.err"
wait "$trees"
# The trees drawn by torch a batch at a time (the GPU path's rows, here on the CPU).
record_trees --kernel greedy-triton --rows torch --trees "$short" \
    --out "$work/greedy-trees-torch.jsonl.gz" > "$work/greedy-trees-torch.json" \
    2> "$work/greedy-trees-torch.err"
echo "sglang: recorded in $(($(date +%s) - t1))s:"
cat "$work"/standard.json "$work"/block.json "$work"/mutant.json "$work"/mutant-block.json \
    "$work"/greedy-trees.json "$work"/greedy-trees-sampled.json

t2=$(date +%s)
for trace in standard block greedy-trees greedy-trees-torch; do
    expect_conforms "$trace"
    grep -E "^(replay|tree-acceptance)" "$work/$trace.report" || true
    tail -n 1 "$work/$trace.report"
done
expect_failure mutant replay          # untempered draft probabilities, standard rule
expect_failure mutant-block replay    # the same, block verification
expect_failure shared-coin fresh      # one coin for every draft of a block round
expect_failure greedy-trees-sampled tree-law   # argmax committed for sampled requests
echo "sglang: checked in $(($(date +%s) - t2))s; stage took $(($(date +%s) - t0))s"
