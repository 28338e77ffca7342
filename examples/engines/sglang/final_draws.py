"""Where SGLang's tree kernel and `verify_tree` part on a recorded trace, and by how much.

    python examples/engines/sglang/final_draws.py TRACE --out TRACE-draws.json
    python examples/engines/sglang/final_draws.py --sum A-draws.json B-draws.json ...

`specaccept conform`'s ``tree-replay`` compares the engine's path and next token with
`verify_tree`'s on the recorded uniforms, exactly. This says, for every tree round with
uniforms, whether they agree; where they part, whether at an accept decision or at the draw
after the path; and for each draw after the path (agreeing or not), which token the exact
inverse CDF gives: the residual (the row with the rejected children's mass removed) summed in
float64, the first token whose prefix sum exceeds ``u * total``. A token's *gap* is how far
``u * total`` lies outside that token's interval of the prefix sums, in units of
``2**-24 * total``; float32 prefix sums over V tokens, added in any order, are within
``V * 2**-24 * total`` of the exact ones (the bound the chain replay's envelope uses), so a
gap below V is a difference float32 rounding can make. `verify_tree` runs on MLX's CPU
device unless ``--device gpu`` is given (MLX's GPU prefix sums are a parallel scan, so they
round as the CPU's left-to-right sums do not).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from specaccept import TreeScheme, verify_tree
from specaccept.conformance.trace import TraceError, TraceStream, TreeRound


def _gap(sums: np.ndarray, weights: np.ndarray, target: float, token: int) -> float:
    """How far `target` lies outside `token`'s interval, in units of 2**-24 of the total."""
    low, high = float(sums[token] - weights[token]), float(sums[token])
    outside = max(low - target, target - high, 0.0)
    return outside / (float(sums[-1]) * 2.0**-24)


def exact_draw(row: np.ndarray, removed: Sequence[int], u: float) -> tuple[int, np.ndarray,
                                                                            np.ndarray]:
    """(the token, the float64 weights, their prefix sums) of the inverse-CDF draw from
    `row` with the tokens `removed` given no mass, the sums taken in float64."""
    weights = row.astype(np.float64)
    weights[list(removed)] = 0.0
    sums = np.cumsum(weights)
    target = u * float(sums[-1])
    eligible = np.flatnonzero((sums > target) & (weights > 0))
    token = int(eligible[0]) if eligible.size else int(np.flatnonzero(weights > 0)[-1])
    return token, weights, sums


def compare(round_: TreeRound) -> dict[str, Any] | None:
    """One round's comparison, or None when it records no uniforms or no next token."""
    if (round_.accept_uniforms is None or round_.sample_uniforms is None
            or round_.next_token is None):
        return None
    verdict = verify_tree(TreeScheme(round_.scheme), round_.parents,
                          mx.array(round_.target_rows), None, list(round_.node_tokens),
                          mx.array(round_.accept_uniforms), mx.array(round_.sample_uniforms))
    count = int(np.array(verdict.num_accepted))
    nodes = np.array(verdict.accepted_nodes).astype(int).tolist()[:count]
    spec_token = int(np.array(verdict.next_token))
    engine_token = round_.next_token
    row = round_.path_rows[-1]
    removed = [round_.node_tokens[c] for c in round_.children[row]]
    u = float(round_.sample_uniforms[len(round_.path)])
    exact, weights, sums = exact_draw(round_.target_rows[row], removed, u)
    target = u * float(sums[-1])
    return {"run": round_.run.id, "round": round_.index, "same_path": nodes == list(round_.path),
            "spec": spec_token, "engine": engine_token, "exact": exact,
            "engine_gap": _gap(sums, weights, target, engine_token),
            "spec_gap": _gap(sums, weights, target, spec_token)}


def summarise(trace: Path) -> dict[str, Any]:
    stream = TraceStream(trace)
    out: dict[str, Any] = {
        "vocab_size": stream.vocab_size, "rounds": 0, "agree": 0, "accept_differs": 0,
        "draw_differs": 0, "same_path": 0, "engine_is_exact": 0, "spec_is_exact": 0,
        "max_engine_gap": 0.0, "max_spec_gap": 0.0, "differing": []}
    for round_ in stream:
        if not isinstance(round_, TreeRound):
            continue
        seen = compare(round_)
        if seen is None:
            continue
        out["rounds"] += 1
        if seen["same_path"]:  # the same residual: the two draws read the same law
            out["same_path"] += 1
            out["engine_is_exact"] += seen["engine"] == seen["exact"]
            out["spec_is_exact"] += seen["spec"] == seen["exact"]
            out["max_engine_gap"] = max(out["max_engine_gap"], seen["engine_gap"])
            out["max_spec_gap"] = max(out["max_spec_gap"], seen["spec_gap"])
        if not seen["same_path"]:
            out["accept_differs"] += 1
            out["differing"].append(seen)
        elif seen["spec"] != seen["engine"]:
            out["draw_differs"] += 1
            out["differing"].append(seen)
        else:
            out["agree"] += 1
    return out


def total(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"vocab_size": parts[0]["vocab_size"], "differing": []}
    for key in ("rounds", "agree", "accept_differs", "draw_differs", "same_path",
                "engine_is_exact", "spec_is_exact"):
        out[key] = sum(p[key] for p in parts)
    for key in ("max_engine_gap", "max_spec_gap"):
        out[key] = max(p[key] for p in parts)
    for p in parts:
        out["differing"] += p["differing"]
    return out


def report(summary: dict[str, Any]) -> str:
    s = summary
    lines = [
        f"{s['rounds']} tree rounds at V = {s['vocab_size']}: engine and verify_tree agree on "
        f"{s['agree']}; differ at an accept decision in {s['accept_differs']}, at the draw "
        f"after the path in {s['draw_differs']}",
        f"draw after the path (rounds with the same path), against the float64 inverse CDF: "
        f"the engine's token is it in {s['engine_is_exact']} of {s['same_path']}, "
        f"verify_tree's in "
        f"{s['spec_is_exact']}; largest gap (units of 2^-24 of the residual's mass): engine "
        f"{s['max_engine_gap']:.1f}, verify_tree {s['max_spec_gap']:.1f} (float32 sums over "
        f"V tokens: below V = {s['vocab_size']})",
    ]
    for d in s["differing"][:20]:
        path = "same" if d["same_path"] else "differs"
        lines.append(f"  run {d['run']} round {d['round']}: path {path}, "
                     f"engine {d['engine']} (gap {d['engine_gap']:.1f}), verify_tree "
                     f"{d['spec']} (gap {d['spec_gap']:.1f}), float64 {d['exact']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path,
                        help="a trace (with --out), or summaries to add up (with --sum)")
    parser.add_argument("--out", type=Path, help="write the trace's summary (JSON) here")
    parser.add_argument("--sum", action="store_true", help="add up summaries and report")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="where MLX runs verify_tree: 'cpu' (default), as conform's "
                             "replay does; 'gpu', MLX's GPU backend, whose prefix sums are a "
                             "parallel scan")
    args = parser.parse_args(argv)
    mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    try:
        if args.sum:
            print(report(total([json.loads(f.read_text("utf-8")) for f in args.files])))
            return 0
        if len(args.files) != 1:
            parser.error(f"one trace at a time, got {len(args.files)} files")
        summary = summarise(args.files[0])
    except (OSError, TraceError, ValueError, KeyError) as error:
        print(f"final_draws.py: {error}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(json.dumps(summary) + "\n", "utf-8")
    print(report(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
