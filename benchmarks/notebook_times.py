"""Time every chapter notebook, learner (book/) and solutions, executed top to bottom on this machine.

    python benchmarks/notebook_times.py [NOTEBOOK...]

Prints seconds per notebook (kernel start included) and the total. The book's target is
under 60 s per notebook on a 2-core CPU; notebooks over it are flagged. Figures, not asserts:
timings on shared machines are noisy, so the tests never time anything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 60.0


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")) + sorted(
        (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")
    )
    total = 0.0
    print(f"{'notebook':<45} {'seconds':>8}")
    for path in paths:
        seconds = run(path)
        total += seconds
        flag = "  OVER TARGET" if seconds > TARGET_S else ""
        print(f"{str(path.resolve().relative_to(ROOT)):<45} {seconds:8.1f}{flag}")
    print(f"{'total':<45} {total:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
