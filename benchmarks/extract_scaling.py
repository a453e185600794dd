"""Extraction's cost as a hostile notebook grows: seconds per size, and the ratio per doubling.

    python benchmarks/extract_scaling.py

Extraction runs in the trusted process on a notebook a student wrote, so its cost must grow
linearly with the notebook (a ratio near 2 per doubling) and stop at ``ExtractLimits``. It times,
side by side, today's ``extract`` and the fixed-point search of needed names it replaced (copied
below), on an assignment chain ``a1 = 1; a2 = a1; ...`` (the shape that took 446 s at 8,000
lines), and ``read_notebook`` + ``extract`` on many cells, one huge cell and deep nesting.
Figures, not asserts.
"""

from __future__ import annotations

import ast
import json
import tempfile
import time
from pathlib import Path

import nbformat

from mhsa_ref.grader.extract import LIMITS, NotebookRefused, _bound, extract, read_notebook


def notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def chain(n: int) -> nbformat.NotebookNode:
    body = "a0 = 1\n" + "".join(f"a{i} = a{i - 1}\n" for i in range(1, n))
    return notebook([body + f"def f():\n    return a{n - 1}\n"])


def needed_by_fixed_point(kept: list[ast.stmt]) -> set[str]:
    """The search ``extract`` used before (commit 0256a74): every assignment re-walked per round."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    needed = {n.id for node in kept if isinstance(node, defs) for n in ast.walk(node) if isinstance(n, ast.Name)}
    assignments = [node for node in kept if isinstance(node, (ast.Assign, ast.AnnAssign))]
    while True:
        grew = {n.id for node in assignments if _bound(node) & needed
                for n in ast.walk(node) if isinstance(n, ast.Name)} - needed
        if not grew:
            return needed
        needed |= grew


def seconds(fn) -> float:
    t0 = time.perf_counter()
    try:
        fn()
    except NotebookRefused:
        pass
    return time.perf_counter() - t0


def read_and_extract(cells: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nb.ipynb"
        path.write_text(json.dumps(notebook(cells)))
        return seconds(lambda: extract(read_notebook(path)))


def main() -> None:
    print("assignment chain: extract today vs the old fixed point (seconds; ratio per doubling)")
    print(f"{'lines':>7} {'today':>8} {'x':>5} {'old search':>11} {'x':>5}")
    last_new = last_old = None
    for n in (500, 1000, 2000, 4000, 8000):
        nb = chain(n)
        new = seconds(lambda: extract(nb))
        kept = ast.parse(nb.cells[0].source).body
        old = seconds(lambda: needed_by_fixed_point(kept)) if n <= 2000 else float("nan")
        print(f"{n:>7} {new:>8.3f} {new / last_new if last_new else float('nan'):>5.1f} "
              f"{old:>11.3f} {old / last_old if last_old else float('nan'):>5.1f}")
        last_new, last_old = new, old
    print("(the old search is not run past 2,000 lines: it grows with the square)")
    print()
    print("read_notebook + extract (seconds; refused beyond ExtractLimits, which stop at "
          f"{LIMITS.cells} cells, {LIMITS.source_lines:,} lines, {LIMITS.source_bytes:,} bytes, depth {LIMITS.depth})")
    for label, cells in [
        ("500 cells", ["x = 1\n"] * 500), ("1,000 cells", ["x = 1\n"] * 1000),
        ("1,001 cells (refused)", ["x = 1\n"] * 1001),
        ("one cell of 5,000 lines", ["x = 1\n" * 5000]), ("one cell of 9,999 lines", ["x = 1\n" * 9999]),
        ("one cell of 10,000 lines (refused)", ["x = 1\n" * 10000]),
        ("one line of 1,000 KB", ["x = '" + "y" * (1000 << 10) + "'\n"]), ("2 MB of code (refused)", ["x = 1\n" * 340000]),
        ("9,000-line chain used by a def", [chain(9000).cells[0].source]),
        ("1 MB of names in 2,400 lists", ["".join(f"b{i} = [" + ",".join(["q"] * 200) + "]\n" for i in range(2400))
                                            + "def g():\n    return " + "+".join(f"b{i}" for i in range(0, 2400, 20)) + "\n"]),
        ("5,000 lines of `x?`", ["x?\n" * 5000]),
        ("nesting depth 90", ["y = " + "+".join(["x"] * 90)]), ("nesting depth 5,000 (refused)", ["y = " + "+".join(["x"] * 5000)]),
    ]:
        print(f"  {label:<32} {read_and_extract(cells):8.3f}")


if __name__ == "__main__":
    main()
