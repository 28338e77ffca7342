#!/usr/bin/env python3
"""Draw the site's plots into docs/_static/plots/.

Run from the repository root:

    python docs/plots/make_plots.py

Each figure answers one question, at a size whose labels stay readable at the site's
column width (about 740 px on a desktop):

1. ``acceptance_vs_temperature.png``: does each rule accept what its closed form says, at
   every temperature? Per-position acceptance of each rule on the demo pair, measured
   and closed form, read from ``docs/results/table.json`` (written by
   ``specaccept table --json``). While that file is still the placeholder, the plot is
   skipped with a message and a placeholder image that says so is written instead, so
   the site still builds.
2. ``tokens_per_round.png``: how many tokens does a round emit? Expected tokens per
   round against the per-position acceptance alpha, for k = 1..8, from
   `specaccept.expected_tokens_per_round`.
3. ``speedup_vs_acceptance.png``: when does speculation pay once drafting costs
   something? Expected speedup over target-only decoding against alpha at a drafter
   cost of 0.1 target forwards per token, for k = 1..8, from `specaccept.expected_speedup`.
   (At drafter cost 0 the speedup equals the tokens per round: no figure of its own.)

Each image carries the command that made it in its footer. The Agg backend is used
directly (no pyplot, no display), and the PNG metadata omits the matplotlib
version, so the same inputs give the same files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps, rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from specaccept import expected_speedup, expected_tokens_per_round

ROOT = Path(__file__).resolve().parents[2]
TABLE_JSON = ROOT / "docs" / "results" / "table.json"
OUT_DIR = ROOT / "docs" / "_static" / "plots"
COMMAND = "python docs/plots/make_plots.py"
TABLE_FIELDS = (
    "temperature", "requested_rule", "rule", "closed_form_sum_min", "closed_form_sum_prod",
    "ratio", "per_position_acceptance", "standard_error", "mean_accepted_len",
    "positions_tested", "rounds", "generated",
)
DRAFTS = range(1, 9)
DRAFT_COST = 0.1
# Drawn at 6.4 x 4.4 inches and shown at the column's width (about 740 px), 12-point text
# (main sets the sizes) reads at about 15 px; saved at 150 dpi, the images stay sharp on
# dense screens.
FIGURE_SIZE = (6.4, 4.4)


def _footer(figure: Figure, source: str) -> None:
    figure.text(
        0.5, 0.01, f"made by: {COMMAND}   |   data: {source}",
        ha="center", va="bottom", fontsize=8.5, color="0.35",
    )


def _save(figure: Figure, name: str) -> Path:
    FigureCanvasAgg(figure)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    figure.savefig(path, dpi=150, metadata={"Software": None})
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def load_table(path: Path) -> list[dict[str, Any]] | None:
    """The rows of `specaccept table --json`, or None while the file is the placeholder.

    Raises:
        SystemExit: the file is neither the placeholder nor a list of complete rows.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("status") == "not yet measured":
        return None
    if not isinstance(data, list) or not data:
        raise SystemExit(f"{path}: expected a non-empty list of table rows, got {type(data)}")
    for index, row in enumerate(data):
        missing = [f for f in TABLE_FIELDS if not isinstance(row, dict) or f not in row]
        if missing:
            raise SystemExit(f"{path}: row {index} lacks the fields {missing}")
    return data


def _series(
    rows: Sequence[dict[str, Any]], requested: str, field: str
) -> tuple[list[float], list[float], list[float]]:
    chosen = sorted(
        (r for r in rows if r["requested_rule"] == requested), key=lambda r: r["temperature"]
    )
    return (
        [float(r["temperature"]) for r in chosen],
        [float(r[field]) for r in chosen],
        [float(r["standard_error"]) for r in chosen],
    )


def plot_acceptance(rows: Sequence[dict[str, Any]] | None, source: str) -> Path:
    """Figure 1; a placeholder image when `rows` is None."""
    figure = Figure(figsize=FIGURE_SIZE)
    axes: Axes = figure.add_subplot()
    title = "Acceptance per position, demo pair"
    if rows is None:
        print(
            f"skipping the acceptance plot: {source} is the 'not yet measured' placeholder; "
            "run `specaccept table --json docs/results/table.json`, then this script again"
        )
        axes.set_axis_off()
        axes.text(
            0.5, 0.5,
            f"not yet measured\n\n{source} is a placeholder:\n"
            f"run `specaccept table --json {source}`,\nthen `{COMMAND}`",
            ha="center", va="center", fontsize=13, transform=axes.transAxes,
        )
    else:
        styles = {"stochastic": ("C0", "closed_form_sum_min", "Σ min(p, q)"),
                  "sampler-match": ("C1", "closed_form_sum_prod", "Σ p·q")}
        for requested, (color, form, form_label) in styles.items():
            temps, measured, errors = _series(rows, requested, "per_position_acceptance")
            if not temps:
                continue
            _, predicted, _ = _series(rows, requested, form)
            axes.errorbar(
                temps, measured, yerr=errors, fmt="o", color=color, capsize=3,
                label=f"{requested}: measured (± s.e.)",
            )
            axes.plot(
                temps, predicted, "--", color=color, label=f"{requested}: closed form {form_label}"
            )
        axes.set_xlabel("temperature (at 0 both rules run greedy-argmax)")
        axes.set_ylabel("per-position acceptance")
        axes.set_ylim(0.0, 1.02)
        axes.grid(alpha=0.3)
        axes.legend(loc="lower left")
    axes.set_title(title)
    figure.subplots_adjust(left=0.12, right=0.95, top=0.91, bottom=0.2)
    _footer(figure, source)
    return _save(figure, "acceptance_vs_temperature.png")


def _alphas() -> list[float]:
    return [i / 100 for i in range(101)]


def _draft_color(k: int) -> Any:
    return colormaps["viridis"](0.9 * (k - 1) / (len(DRAFTS) - 1))


def plot_tokens_per_round() -> Path:
    """Figure 2: expected tokens per round against alpha (lemma 8), for k = 1..8."""
    figure = Figure(figsize=FIGURE_SIZE)
    axes: Axes = figure.add_subplot()
    for k in DRAFTS:
        axes.plot(_alphas(), [expected_tokens_per_round([a] * k) for a in _alphas()],
                  color=_draft_color(k), label=f"k = {k}")
    axes.set_title("Expected tokens per round (lemma 8)")
    axes.set_xlabel(r"per-position acceptance $\alpha$")
    axes.set_ylabel("tokens per round")
    axes.set_xlim(0.0, 1.0)
    axes.grid(alpha=0.3)
    axes.legend(title="drafts per round", loc="upper left", ncols=2)
    figure.subplots_adjust(left=0.12, right=0.95, top=0.91, bottom=0.2)
    _footer(figure, "specaccept.expected_tokens_per_round")
    return _save(figure, "tokens_per_round.png")


def plot_speedup() -> Path:
    """Figure 3: expected speedup against alpha at drafter cost DRAFT_COST, for k = 1..8."""
    figure = Figure(figsize=FIGURE_SIZE)
    axes: Axes = figure.add_subplot()
    for k in DRAFTS:
        axes.plot(_alphas(), [expected_speedup(a, k, DRAFT_COST) for a in _alphas()],
                  color=_draft_color(k), label=f"k = {k}")
    axes.axhline(1.0, color="0.3", lw=1.0)
    axes.axhspan(0.0, 1.0, color="0.9", zorder=0)
    axes.text(0.98, 0.6, "slower than target-only", ha="right", va="center", color="0.3")
    axes.set_title(f"Expected speedup, drafter cost c = {DRAFT_COST:g} (lemma 8)")
    axes.set_xlabel(r"per-position acceptance $\alpha$")
    axes.set_ylabel(r"speedup over target-only ($\times$)")
    axes.set_xlim(0.0, 1.0)
    axes.set_ylim(0.5, 5.2)
    axes.grid(alpha=0.3)
    axes.legend(title="drafts per round", loc="upper left", ncols=2)
    figure.subplots_adjust(left=0.12, right=0.95, top=0.91, bottom=0.2)
    _footer(figure, "specaccept.expected_speedup")
    return _save(figure, "speedup_vs_acceptance.png")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--table", type=Path, default=TABLE_JSON,
        help="the JSON of `specaccept table --json` (default: docs/results/table.json)",
    )
    args = parser.parse_args(argv)
    table: Path = args.table.resolve()
    try:
        source = str(table.relative_to(ROOT))
    except ValueError:
        source = str(table)
    with rc_context({"font.size": 12, "axes.titlesize": 13, "legend.fontsize": 10.5}):
        plot_acceptance(load_table(table), source)
        plot_tokens_per_round()
        plot_speedup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
