#!/usr/bin/env python3
"""Draw the site's plots into docs/_static/plots/.

Run from the repository root:

    python docs/plots/make_plots.py

1. ``acceptance_vs_temperature.png``: per-position acceptance of each rule against
   temperature on the demo pair, measured and closed form, read from
   ``docs/results/table.json`` (written by ``specaccept table --json``). While that
   file is still the placeholder, the plot is skipped with a message and a
   placeholder image that says so is written instead, so the site still builds.
2. ``tokens_and_speedup.png``: expected tokens per round and expected speedup against
   the per-position acceptance alpha, for k = 1..8, from
   `specaccept.expected_tokens_per_round` and `specaccept.expected_speedup`.

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

from matplotlib import colormaps
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
DRAFT_COSTS = (0.0, 0.1)


def _footer(figure: Figure, source: str) -> None:
    figure.text(
        0.5, 0.01, f"made by: {COMMAND}   |   data: {source}",
        ha="center", va="bottom", fontsize=8, color="0.35",
    )


def _save(figure: Figure, name: str) -> Path:
    FigureCanvasAgg(figure)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    figure.savefig(path, dpi=120, metadata={"Software": None})
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
    """Plot (a); a placeholder image when `rows` is None."""
    figure = Figure(figsize=(7.5, 4.8))
    axes: Axes = figure.add_subplot()
    title = "Per-position acceptance vs temperature, demo pair"
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
        axes.set_xlabel("temperature (0: both requests run greedy-argmax)")
        axes.set_ylabel("per-position acceptance")
        axes.set_ylim(0.0, 1.02)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8, loc="lower left")
    axes.set_title(title)
    figure.subplots_adjust(bottom=0.17)
    _footer(figure, source)
    return _save(figure, "acceptance_vs_temperature.png")


def plot_tokens_and_speedup() -> Path:
    """Plot (b): the closed forms of lemma 8, for k = 1..8."""
    alphas = [i / 100 for i in range(101)]
    figure = Figure(figsize=(12, 4.8))
    palette = colormaps["viridis"]
    panels: list[Axes] = [figure.add_subplot(1, 1 + len(DRAFT_COSTS), i + 1)
                          for i in range(1 + len(DRAFT_COSTS))]
    for k in DRAFTS:
        color = palette(0.9 * (k - 1) / (len(DRAFTS) - 1))
        panels[0].plot(alphas, [expected_tokens_per_round([a] * k) for a in alphas],
                       color=color, label=f"k = {k}")
        for panel, c in zip(panels[1:], DRAFT_COSTS, strict=True):
            panel.plot(alphas, [expected_speedup(a, k, c) for a in alphas], color=color)
    panels[0].set_title("tokens per round")
    panels[0].set_ylabel("tokens per round")
    panels[0].legend(fontsize=8, loc="upper left")
    for panel, c in zip(panels[1:], DRAFT_COSTS, strict=True):
        note = " (= tokens per round)" if c == 0 else ""
        panel.set_title(f"speedup, c = {c:g}{note}")
        panel.axhline(1.0, color="0.5", lw=0.8)
        panel.set_ylabel("speedup over target-only")
    for panel in panels:
        panel.set_xlabel("per-position acceptance alpha")
        panel.grid(alpha=0.3)
    figure.suptitle(
        "Lemma 8: expected tokens per round and speedup vs alpha, k = 1..8 "
        "(c: drafter cost per token; verify cost = one target forward)", fontsize=11,
    )
    figure.subplots_adjust(bottom=0.2, top=0.84, wspace=0.3)
    _footer(figure, "specaccept.expected_tokens_per_round, specaccept.expected_speedup")
    return _save(figure, "tokens_and_speedup.png")


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
    plot_acceptance(load_table(table), source)
    plot_tokens_and_speedup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
