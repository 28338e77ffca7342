"""The import contracts can fail: plant a violation in a copy of the package and watch.

`lint-imports` runs in CI on the real tree (.ci/check.py). These tests run it on a copy
with one forbidden import planted, and require a non-zero exit and a report that names
the importing module, so the contracts are shown to bite, not just to pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_copy(tmp_path: Path, module: str, planted: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "impl" / "specaccept", tmp_path / "impl" / "specaccept",
        ignore=shutil.ignore_patterns("__pycache__", "weights", "data"),
    )
    target = tmp_path / "impl" / "specaccept" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "impl")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=False,
    )


def test_the_real_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint_copy(tmp_path, "core/rewind.py", "# nothing planted")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "planted", "named"),
    [
        ("core/sampling.py", "import specaccept.shell.generator", "specaccept.core.sampling"),
        ("core/theory.py", "import mlx_lm", "specaccept.core.theory"),
        ("core/rewind.py", "import specaccept.conformance.trace", "specaccept.core.rewind"),
        ("conformance/law.py", "import specaccept.shell.generator", "specaccept.conformance.law"),
        ("conformance/trace.py", "import mlx_lm", "specaccept.conformance.trace"),
        ("shell/loading.py", "import specaccept.cli.options", "specaccept.shell.loading"),
        ("cli/table.py", "import specaccept.cli.bench", "specaccept.cli.table"),
        ("cli/options.py", "from mlx_lm import load", "specaccept.cli.options"),
    ],
)
def test_a_planted_violation_fails_naming_the_import(
    tmp_path: Path, module: str, planted: str, named: str
) -> None:
    result = _lint_copy(tmp_path, module, planted)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout.upper()
    assert named in result.stdout, result.stdout
