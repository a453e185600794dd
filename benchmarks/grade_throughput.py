"""Grading throughput: seconds per chapter-01 submission with 1 and 2 workers, side by side.

    python benchmarks/grade_throughput.py [N]

Generates N chapter-01 submissions (a third solved, a third with a named mistake, a third not
implemented: the judge's work differs between them), grades them with ``grade_batch`` (sandbox
included) once with 1 worker and once with 2, and prints wall seconds per submission, the
throughput per core, and the share of the sandboxed time spent starting processes (Python,
NumPy and isolation, until the sandbox says it is ready). Figures, not asserts: on a shared
machine only ratios measured in one run mean much.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from mhsa_ref.grader.batch import grade_batch

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.5


def make_submissions(folder: Path, n: int) -> None:
    solved = nbformat.read(ROOT / "solutions" / "01_attention_numpy.ipynb", as_version=4)
    fresh = nbformat.read(ROOT / "book" / "01_attention_numpy.ipynb", as_version=4)
    wrong = nbformat.read(ROOT / "solutions" / "01_attention_numpy.ipynb", as_version=4)
    for cell in wrong.cells:  # softmax over axis 0: diagnosed as softmax-wrong-axis
        if cell.cell_type == "code" and "def softmax(" in cell.source:
            cell.source = cell.source.replace("axis=axis", "axis=0")
    for i in range(n):
        nb = (solved, wrong, fresh)[i % 3]
        path = folder / f"student{i:03d}" / "01_attention_numpy.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))


def measure(folder: Path, jobs: int, n: int) -> tuple[float, dict]:
    out = Path(tempfile.mkdtemp(prefix="grade-bench-out-"))
    try:
        start = time.perf_counter()
        doc = grade_batch([folder], out, jobs=jobs, seed=1, progress=False)
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)
    subs = doc["submissions"]
    assert len(subs) == n and all(s["error"] is None for s in subs), "every submission graded"
    return wall, doc


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    folder = Path(tempfile.mkdtemp(prefix="grade-bench-"))
    try:
        make_submissions(folder, n)
        grade_batch([folder / "student000"], Path(tempfile.mkdtemp()), progress=False)  # warm the disk cache
        print(f"{n} chapter-01 submissions, {os.cpu_count()} CPU cores; target < {TARGET_S} s per submission")
        print(f"{'workers':>8} {'wall s':>8} {'s/submission':>13} {'submissions/s per core':>23} "
              f"{'process start share':>20}")
        rates = {}
        for jobs in (1, 2):
            wall, doc = measure(folder, jobs, n)
            starts = sum(s.get("start_seconds", 0.0) for s in doc["submissions"])
            per_sub_sandbox = sum(s["seconds"] for s in doc["submissions"])
            rates[jobs] = n / wall / jobs
            print(f"{jobs:>8} {wall:>8.2f} {wall / n:>13.3f} {rates[jobs]:>23.2f} "
                  f"{starts / per_sub_sandbox:>19.0%}")
        print(f"per-core throughput with 2 workers / with 1: {rates[2] / rates[1]:.2f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
