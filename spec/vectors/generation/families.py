"""Regenerate the golden vectors in ``spec/vectors/*.json`` from the reference implementation.

The table of families, each file's rendering, and the command line (``spec/vectors/generate.py``
runs `main`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from .accept_draft_token import accept_draft_token_vectors
from .acceptance_closed_forms import acceptance_closed_forms_vectors
from .acceptance_rule import acceptance_rule_vectors
from .common import FORMAT_VERSION, GenerationError, Json, Vector, render
from .effective_token_distribution import effective_token_distribution_vectors
from .errors import error_vectors
from .expected import expected_speedup_vectors, expected_tokens_per_round_vectors
from .grid_draw_counts import grid_draw_counts_vectors
from .pinned import pinned_choice_vectors
from .residual_distribution import residual_distribution_vectors
from .rewind_trim import rewind_trim_vectors
from .sample_from_distribution import sample_from_distribution_vectors
from .sampler_config import sampler_config_vectors
from .seeded_run import seeded_run_vectors
from .tree_acceptance import tree_acceptance_vectors
from .uniforms import position_uniform_vectors, round_uniform_vectors
from .verify_blockwise import verify_blockwise_vectors
from .verify_draft_token import verify_draft_token_vectors
from .verify_tokenwise import verify_tokenwise_vectors
from .verify_tree import verify_tree_vectors

HERE = Path(__file__).resolve().parents[1]
"""spec/vectors/, where the committed files live."""

FAMILIES: dict[str, tuple[list[str], str, Callable[[], list[Vector]]]] = {
    "sampler_config": (
        ["SamplerConfig"], "config -> is_greedy, uses_history; or the error of a bad field",
        sampler_config_vectors,
    ),
    "effective_token_distribution": (
        ["effective_token_distribution", "sample_token_with_distribution"],
        "logits, config and history -> probs; each draw_uniforms[j] -> draw_tokens[j] "
        "through sample_token_with_distribution (1-d logits only)",
        effective_token_distribution_vectors,
    ),
    "sample_from_distribution": (
        ["sample_from_distribution"], "probs, u -> token (inverse CDF, strict >)",
        sample_from_distribution_vectors,
    ),
    "accept_draft_token": (
        ["accept_draft_token"], "p, q, token, u -> accepted", accept_draft_token_vectors,
    ),
    "residual_distribution": (
        ["residual_distribution", "residual_resample"],
        "p, q -> residual; each u[j] -> tokens[j] through residual_resample",
        residual_distribution_vectors,
    ),
    "verify_draft_token": (
        ["verify_draft_token"], "rule, p, q, token, u_accept, u_sample -> accepted, token",
        verify_draft_token_vectors,
    ),
    "verify_tokenwise": (
        ["verify_tokenwise"],
        "rule, target_probs, draft_probs, draft_tokens, uniforms -> num_accepted, next_token",
        verify_tokenwise_vectors,
    ),
    "verify_blockwise": (
        ["verify_blockwise"],
        "target_probs, draft_probs, draft_tokens, uniforms -> num_accepted, next_token, "
        "accepted_length_law (block verification)",
        verify_blockwise_vectors,
    ),
    "rewind_trim": (
        ["rewind_trim"], "num_draft, num_accepted -> target_trim, draft_trim, draft_backfill",
        rewind_trim_vectors,
    ),
    "acceptance_closed_forms": (
        ["acceptance_closed_forms", "acceptance_probability"],
        "p, q -> sum_min, sum_prod, total_variation, acceptance_probability per rule id",
        acceptance_closed_forms_vectors,
    ),
    "acceptance_rule": (
        ["acceptance_rule"], "target_config, drafter_has_distribution, stochastic -> rule id",
        acceptance_rule_vectors,
    ),
    "expected_tokens_per_round": (
        ["expected_tokens_per_round"], "alphas -> tokens (float64)",
        expected_tokens_per_round_vectors,
    ),
    "expected_speedup": (
        ["expected_speedup"], "alpha, k, c, verify_cost -> speedup (float64)",
        expected_speedup_vectors,
    ),
    "position_uniform": (
        ["core.randomness.position_uniform"],
        "seed, position, slot name -> the run's uniform (not part of the acceptance contract)",
        position_uniform_vectors,
    ),
    "grid_draw_counts": (
        ["grid_draw_counts"], "probs -> counts of the 2**24 grid uniforms drawing each id",
        grid_draw_counts_vectors,
    ),
    "round_uniform": (
        ["core.randomness.round_uniform"],
        "seed, round position, offset, slot name -> the round-keyed uniform",
        round_uniform_vectors,
    ),
    "seeded_run": (
        ["shell.seeded_run.seeded_run"],
        "laws as tables of the history, prompt, rule, k, max_tokens, seed -> the emitted "
        "tokens and every round's position, drafts, num_accepted and next_token",
        seeded_run_vectors,
    ),
    "verify_tree": (
        ["verify_tree"],
        "scheme, parents, target_probs, draft_probs, draft_tokens, accept_uniforms, "
        "sample_uniforms -> num_accepted, accepted_nodes, next_token (tree verification)",
        verify_tree_vectors,
    ),
    "tree_acceptance": (
        ["iid_siblings_acceptance", "without_replacement_siblings_acceptance",
         "candidate_siblings_acceptance", "multi_draft_ceiling"],
        "p, q, num_drafts, candidates -> iid_siblings_acceptance (RRS at one node), "
        "without_replacement_siblings_acceptance (RSD), candidate_siblings_acceptance "
        "(deterministic candidates), multi_draft_ceiling (alpha*)",
        tree_acceptance_vectors,
    ),
}


def build(family: str) -> str:
    functions, description, make = FAMILIES[family]
    vectors = make() + pinned_choice_vectors(family) + error_vectors(family)
    names = [v["name"] for v in vectors]
    if len(set(map(str, names))) != len(names):
        raise GenerationError(f"{family}: duplicate vector names")
    document: Json = {
        "family": family,
        "format_version": FORMAT_VERSION,
        "functions": [f"specaccept.{name}" for name in functions],
        "description": description,
        "generated_by": "spec/vectors/generate.py",
        "vectors": list(vectors),
    }
    text = render(document) + "\n"
    if json.loads(text) != document:
        raise GenerationError(f"{family}: the rendered JSON does not round-trip")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE,
                        help="directory to write the JSON files into (default: spec/vectors/)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    for family in FAMILIES:
        text = build(family)
        (out_dir / f"{family}.json").write_bytes(text.encode("ascii"))
        count = len(json.loads(text)["vectors"])
        print(f"{family}.json: {count} vectors")
    return 0
