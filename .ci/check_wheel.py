#!/usr/bin/env python3
"""The install path: build the wheel, install it with no extras in a fresh environment, and
run the command from a folder outside the checkout, as `pip install specaccept` would; and
the sdist, which must hold every tracked file.

Checks that the wheel carries the golden vectors, their schema, the NumPy port and the
LICENSE but not the demo pair's training text; that `--help`, `--version` and
`vectors check --numpy-port` work there; that `conform` checks a trace written with the
installed stdlib writer (a verdict, 0 or 1, not a crash); that `generate` either runs or
refuses in one line naming the extra; and that the library's `load_pair()` refuses the same
way. Run from the
repository root inside the `.[dev]` environment (hatchling builds the wheel without
fetching anything; pip installs mlx, numpy and scipy from its cache or the index).
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA_LINE = "pip install 'specaccept[shell]'"
# One stochastic round of one draft, written with the installed stdlib trace writer.
WRITE_TRACE = """
import sys
import specaccept_trace as st
with st.TraceWriter(sys.argv[1], vocab_size=4, engine="install check") as trace:
    run = trace.start_run("a", prompt=[0, 1], target_sampler={"temperature": 1.0})
    run.write_round(rule="stochastic", draft_tokens=[0], emitted=[0, 1],
                    target=st.probs_block([[0.5, 0.25, 0.125, 0.125], [0.25] * 4]),
                    draft=st.probs_block([[0.25] * 4]), uniforms=[[0.25, 0.5], [0.0, 0.3]])
"""


def run(command: list[str], cwd: Path, *, expect: set[int] | None = None) -> tuple[int, str]:
    """Run `command`; fail the check on an unexpected status; return status and output."""
    print("+", " ".join(command), flush=True)
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    if result.returncode not in (expect or {0}):
        sys.exit(f"exit {result.returncode}, expected {sorted(expect or {0})}:\n{output}")
    return result.returncode, output


def check_contents(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    wanted = ["specaccept/golden_vectors/schema.json", "specaccept/golden_vectors/schema.md",
              "specaccept/golden_vectors/families.md",
              "specaccept/golden_vectors/verify_tokenwise.json",
              "specaccept/numpy_port/serve.py", "specaccept/numpy_port/specport.py",
              "specaccept/demo/weights/target/model.safetensors", "specaccept_command.py",
              "specaccept_trace.py", "specaccept/py.typed"]
    missing = [name for name in wanted if name not in names]
    if missing:
        sys.exit(f"the wheel lacks {missing}")
    if not any(name.endswith(".dist-info/licenses/LICENSE") for name in names):
        sys.exit("the wheel has no LICENSE")
    unwanted = [name for name in names if "tinyshakespeare" in name or "/generation/" in name]
    if unwanted:
        sys.exit(f"the wheel carries what nothing installed reads: {unwanted}")
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    if "License-Expression: MIT" not in zipfile.ZipFile(wheel).read(metadata).decode():
        sys.exit("the wheel's metadata has no License-Expression: MIT")
    print(f"wheel contents: {len(names)} files, vectors, port and LICENSE in, corpus out")


def check_sdist(sdist: Path) -> None:
    """The sdist holds every tracked file, so its tests find the spec/, proofs/, docs/ and
    examples/ they read."""
    prefix = sdist.name.removesuffix(".tar.gz") + "/"
    with tarfile.open(sdist) as archive:
        names = {name.removeprefix(prefix) for name in archive.getnames()}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    missing = [name for name in tracked if name not in names]
    if missing:
        sys.exit(f"the sdist lacks {len(missing)} tracked files, e.g. {missing[:5]}")
    print(f"sdist: {len(names)} files, every tracked file in")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="specaccept-wheel-") as scratch:
        scratch_dir = Path(scratch)
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
             "-w", str(scratch_dir / "dist"), str(ROOT)], ROOT)
        wheel = next((scratch_dir / "dist").glob("specaccept-*.whl"))
        check_contents(wheel)
        run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d",
             str(scratch_dir / "dist")], ROOT)
        check_sdist(next((scratch_dir / "dist").glob("specaccept-*.tar.gz")))
        environment = scratch_dir / "env"
        venv.create(environment, with_pip=True)
        python = environment / "bin" / "python"
        specaccept = str(environment / "bin" / "specaccept")
        run([str(python), "-m", "pip", "install", "-q", str(wheel)], scratch_dir)
        elsewhere = scratch_dir / "elsewhere"  # no spec/ or examples/ to fall back on
        elsewhere.mkdir()
        run([specaccept, "--help"], elsewhere)
        _, version = run([specaccept, "--version"], elsewhere)
        if not version.startswith("specaccept "):
            sys.exit(f"--version printed {version!r}")
        _, replay = run([specaccept, "vectors", "check", "--numpy-port"], elsewhere)
        if not replay.rstrip().endswith("vectors passed"):
            sys.exit(f"vectors check did not replay the installed vectors:\n{replay}")
        trace = str(elsewhere / "trace.jsonl")
        run([str(python), "-c", WRITE_TRACE, trace], elsewhere)
        _, verdict = run([specaccept, "conform", trace], elsewhere, expect={0, 1})
        if "Traceback" in verdict:
            sys.exit(f"conform crashed:\n{verdict}")
        status, generated = run([specaccept, "generate", "-n", "8"], elsewhere, expect={0, 2})
        lines = generated.strip().splitlines()
        if status == 2 and not (len(lines) == 1 and lines[0].endswith(EXTRA_LINE)):
            sys.exit(f"generate refused, but not in one line naming the extra:\n{generated}")
        if status == 0 and "[Speculative acceptance]" not in generated:
            sys.exit(f"generate ran without its summary line:\n{generated}")
        _, loaded = run([str(python), "-c", "import specaccept\ntry:\n    specaccept.load_pair()"
                         "\nexcept ImportError as error:\n    print(error)"], elsewhere)
        if status == 2 and not loaded.strip().endswith(EXTRA_LINE):
            sys.exit(f"load_pair() without the extra said {loaded!r}")
        print(f"installed wheel: --help, --version, vectors check, conform and generate "
              f"({'refused in one line' if status == 2 else 'ran'}) as expected")


if __name__ == "__main__":
    main()
