"""The Gradescope autograder bundle for one chapter, and the step that hands Gradescope its results.

``write_bundle("01", "autograder.zip")`` writes a zip with ``setup.sh`` (run once, as root, when
Gradescope builds the image: a virtual environment with ``mhsa_ref`` installed from the copy in
the zip, readable by root only) and ``run_autograder`` (run per submission: grade
``/autograder/submission`` in the sandbox, write ``/autograder/results/results.json``).
Both honour ``AUTOGRADER_ROOT`` and ``MHSA_PYTHON`` so that tests can run them in a simulated tree.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from .. import chapters, exercises

PACKAGE = Path(__file__).resolve().parent.parent

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="${{MHSA_VENV:-/opt/mhsa-venv}}"
if ! python3 -m venv --help >/dev/null 2>&1; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-venv python3-pip
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
{torch}"$VENV/bin/pip" install --quiet "$ROOT/source/mhsa_ref_src"
# Submissions run as an unprivileged user: the reference and this bundle stay readable by root only.
chmod -R go-rwx "$ROOT/source" "$("$VENV/bin/python" -c 'import mhsa_ref, os; print(os.path.dirname(mhsa_ref.__file__))')"
"""

TORCH = """# CPU PyTorch from PyTorch's own index: the default one would pull several GB of CUDA packages.
"$VENV/bin/pip" install --quiet torch --index-url https://download.pytorch.org/whl/cpu
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PY="${{MHSA_PYTHON:-/opt/mhsa-venv/bin/python}}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$ROOT/results"
"$PY" -m mhsa_ref.grader.cli "$ROOT/submission" --chapter {chapter} --out "$OUT" --jobs 1 --no-progress \\
    --timeout {timeout} --memory {memory}
"$PY" -m mhsa_ref.grader.gradescope collect "$OUT" "$ROOT/results/results.json"
"""

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mhsa-ref"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = ["numpy>=1.24", "nbformat>=5.9", "tqdm>=4", "ipython>=8"]

[project.scripts]
mhsa-grade = "mhsa_ref.grader.cli:main"

[tool.setuptools.packages.find]
include = ["mhsa_ref*"]
"""


def write_bundle(chapter: str, output: Path, timeout: float = 10.0, memory: int = 512) -> None:
    chapter = chapters.normalize(chapter)
    if not exercises.for_chapter(chapter):
        raise ValueError(f"chapter {chapter} has no exercises")
    # PyTorch only for the chapters that need it: NumPy chapters stay small and fast to build.
    needs_torch = "torch" in chapters.get(chapter).requires
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as zf:
        _add(zf, "setup.sh", SETUP.format(torch=TORCH if needs_torch else ""), executable=True)
        _add(zf, "run_autograder", RUN.format(chapter=chapter, timeout=timeout, memory=memory), executable=True)
        _add(zf, "mhsa_ref_src/pyproject.toml", PYPROJECT)
        for path in sorted(PACKAGE.rglob("*.py")):
            if "__pycache__" not in path.parts:
                _add(zf, f"mhsa_ref_src/mhsa_ref/{path.relative_to(PACKAGE).as_posix()}", path.read_text())


def _add(zf: zipfile.ZipFile, name: str, text: str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, text)


def collect(out: Path, destination: Path) -> None:
    """Copy the submission's Gradescope result to ``destination`` (one notebook expected)."""
    results = sorted((out / "gradescope").glob("*.json"))
    if not results:
        doc = {"score": 0.0, "output": "No notebook (.ipynb) was found in your submission: upload the "
                                      "chapter's notebook, downloaded from Colab as .ipynb.", "tests": []}
    else:
        docs = [json.loads(p.read_text()) for p in results]
        doc = max(docs, key=lambda d: d.get("score", 0.0))  # several notebooks: the best one counts
        if len(docs) > 1:
            doc["output"] += f"\nYour submission held {len(docs)} notebooks; the best-scoring one counts."
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] != ["collect"] or len(sys.argv) != 4:
        sys.exit("usage: python -m mhsa_ref.grader.gradescope collect OUT_DIR RESULTS_JSON")
    collect(Path(sys.argv[2]), Path(sys.argv[3]))
