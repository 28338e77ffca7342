"""What `pip install specaccept` gives, without the `shell` extra, checked from a checkout.

`.ci/check_wheel.py` builds the wheel, installs it with no extras in a fresh environment and
runs the command there; these tests pin the pieces it relies on: the refusal in one line
naming the extra, the version, the golden vectors and the NumPy port found where the wheel
puts them, and the wheel's list of forced files kept complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

import specaccept
from specaccept.cli import main, vectors
from specaccept.shell import loading

ROOT = Path(__file__).resolve().parents[1]
EXTRA_LINE = "pip install 'specaccept[shell]'"


def _forced_files() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    forced: dict[str, str] = project["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    return forced


def test_the_wheel_forces_in_every_vectors_file_and_the_numpy_port() -> None:
    forced = _forced_files()
    wanted = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "spec" / "vectors").iterdir()
        if path.suffix in {".json", ".md"}
    )
    assert sorted(k for k in forced if k.startswith("spec/vectors/")) == wanted
    for source, target in forced.items():
        assert (ROOT / source).is_file(), source
        expected = ("specaccept/golden_vectors/" if source.startswith("spec/vectors/")
                    else "specaccept/numpy_port/") + Path(source).name
        assert target == expected
    assert {Path(k).name for k in forced if k.startswith("examples/")} >= {"serve.py",
                                                                           "specport.py"}


def test_the_wheel_leaves_out_the_training_text() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "impl/specaccept/demo/data" in wheel["exclude"]
    # Nothing installed reads it: only the repository's training script, tests and benchmarks.
    readers = [path for path in (ROOT / "impl" / "specaccept").rglob("*.py")
               if "corpus_path()" in path.read_text("utf-8") and path.name != "__init__.py"]
    assert readers == []


@pytest.mark.parametrize("command", [["generate"], ["table"], ["bench"],
                                     ["conform", "t.jsonl", "--record", "specaccept"]])
def test_a_command_that_runs_models_names_the_extra_when_it_is_missing(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(loading, "missing_shell_modules", lambda: ["mlx-lm", "tqdm"])
    with pytest.raises(SystemExit) as exit_:
        main(command)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"{EXTRA_LINE}\n")
    assert f"specaccept {command[0]} needs mlx-lm and tqdm" in err


def test_a_late_import_of_the_extra_is_refused_in_the_same_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    def handler(_: object) -> int:
        raise ModuleNotFoundError("No module named 'mlx_lm'", name="mlx_lm.models")

    monkeypatch.setattr(vectors, "run_check", handler)
    with pytest.raises(SystemExit) as exit_:
        main(["vectors", "check", "--port", "true"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"specaccept: error: specaccept vectors needs mlx_lm.models, not installed: "
        f"{EXTRA_LINE}\n")


def test_another_missing_module_is_not_blamed_on_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def handler(_: object) -> int:
        raise ModuleNotFoundError("No module named 'nothere'", name="nothere")

    monkeypatch.setattr(vectors, "run_check", handler)
    with pytest.raises(ModuleNotFoundError):
        main(["vectors", "check", "--port", "true"])


def test_loading_a_model_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "missing_shell_modules", lambda: ["mlx-lm"])
    with pytest.raises(loading.MissingExtraError, match=r"loading a model needs mlx-lm, not "
                       r"installed: pip install 'specaccept\[shell\]'"):
        specaccept.load_pair()


def test_version_names_specaccept_mlx_and_mlx_lm(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"specaccept {specaccept.__version__} (mlx ")
    assert "mlx-lm " in out


def test_installed_vectors_and_port_come_before_a_checkouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = tmp_path / "site-packages" / "specaccept"
    (package / "golden_vectors").mkdir(parents=True)
    (package / "numpy_port").mkdir()
    (package / "numpy_port" / "serve.py").write_text("", "utf-8")
    monkeypatch.setattr(vectors, "PACKAGE_DIR", package)
    assert vectors.default_vectors_dir() == package / "golden_vectors"
    assert vectors.numpy_port_command().endswith(str(package / "numpy_port" / "serve.py"))


def test_a_checkout_finds_its_own_vectors_and_port() -> None:
    assert vectors.default_vectors_dir() == ROOT / "spec" / "vectors"
    assert vectors.numpy_port_command().endswith(
        str(ROOT / "examples" / "numpy_port" / "serve.py"))


def test_no_vectors_anywhere_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors, "PACKAGE_DIR", tmp_path / "lib" / "site-packages" / "x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="pass --vectors DIR"):
        vectors.default_vectors_dir()
    with pytest.raises(ValueError, match="pass --port CMD"):
        vectors.numpy_port_command()
