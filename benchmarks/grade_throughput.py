"""Grading throughput: seconds per chapter-01 submission with 1 and 2 workers, side by side.

    python benchmarks/grade_throughput.py [N]

Generates chapter-01 submissions (a third solved, a third with a named mistake, a third not
implemented: the judge's work differs between them) and grades batches of N and of 2N of them
with ``grade_batch`` (sandbox included), with 1 worker and with 2. It prints the wall time of
each batch, the cost of one more submission ((wall(2N) - wall(N)) / N: the batch's fixed costs,
starting workers and writing the reports and chart, cancel out), the throughput per core, and
the share of the sandboxed time spent starting the sandbox (fork, isolation, until it says it
is ready). Figures, not asserts: on a shared machine only ratios measured in one run mean much.
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


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def machine_two_process_efficiency(n: int = 4_000_000) -> float:
    """Per-core efficiency of this machine itself: pure Python work, 2 processes against 1.

    Shared virtual CPUs rarely give two full cores; this is the ceiling for any 2-worker figure."""
    import multiprocessing

    start = time.perf_counter()
    _spin(n), _spin(n)
    serial = time.perf_counter() - start
    with multiprocessing.Pool(2) as pool:
        pool.map(_spin, [1000, 1000])  # workers started before timing
        start = time.perf_counter()
        pool.map(_spin, [n, n])
        parallel = time.perf_counter() - start
    return serial / parallel / 2


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    folders = {}
    try:
        for size in (n, 2 * n):
            folders[size] = Path(tempfile.mkdtemp(prefix="grade-bench-"))
            make_submissions(folders[size], size)
        grade_batch([folders[n] / "student000"], Path(tempfile.mkdtemp()), progress=False)  # warm caches
        print(f"chapter-01 submissions, {os.cpu_count()} CPU cores; target < {TARGET_S} s per submission")
        print(f"{'workers':>8} {f'wall, {n}':>10} {f'wall, {2 * n}':>10} {'s/submission':>13} "
              f"{'submissions/s per core':>23} {'sandbox start share':>20}")
        rates = {}
        for jobs in (1, 2):
            wall_n, _ = measure(folders[n], jobs, n)
            wall_2n, doc = measure(folders[2 * n], jobs, 2 * n)
            per_submission = (wall_2n - wall_n) / n
            starts = sum(s["start_seconds"] for s in doc["submissions"])
            sandboxed = sum(s["seconds"] for s in doc["submissions"])
            rates[jobs] = 1 / per_submission / jobs
            print(f"{jobs:>8} {wall_n:>10.2f} {wall_2n:>10.2f} {per_submission:>13.3f} {rates[jobs]:>23.1f} "
                  f"{starts / sandboxed:>20.0%}")
        print(f"per-core throughput with 2 workers / with 1: {rates[2] / rates[1]:.2f} "
              f"(this machine's own ceiling, pure Python in 2 processes / 1: "
              f"{machine_two_process_efficiency():.2f})")
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
