"""Write the scripted class (``roster.py``) into a folder, as students hand notebooks in.

Each notebook starts from the chapter's book notebook (the learner's copy, stamped with its
chapter) or from its published solutions under the book's metadata, with the student's cells
written over the exercise cells; it is saved with a stream output in every code cell, as a
learner's notebook that was run is.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from ..conftest import ROOT
from . import POINTS_FILE, OVERRIDES_FILE
from .roster import NOTEBOOKS, SCORING, ClassSpec, Notebook, build_roster, name_of, overrides_csv, points_csv


def build_class(root: Path, spec: ClassSpec | None = None) -> ClassSpec:
    """Write every notebook of ``spec`` (default: the whole roster) under ``root``, and the
    instructor's points and overrides files beside it (when the grader scores with them)."""
    spec = spec or build_roster()
    root.mkdir(parents=True, exist_ok=True)
    if SCORING:
        (root.parent / POINTS_FILE).write_text(points_csv())
        (root.parent / OVERRIDES_FILE).write_text(overrides_csv())
    for nb in spec.notebooks:
        path = root / nb.path
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook(nb), path)
    return spec


def notebook(nb: Notebook) -> nbformat.NotebookNode:
    book = nbformat.read(ROOT / "book" / NOTEBOOKS[nb.chapter], as_version=4)
    doc = book if nb.base == "book" else nbformat.read(ROOT / "solutions" / NOTEBOOKS[nb.chapter], as_version=4)
    doc.metadata = book.metadata  # the chapter stamp a learner's copy carries
    for answer in nb.answers:
        cell = exercise_cell_of(doc, name_of(answer.exercise))
        if answer.code is not None:
            cell.source = answer.code
    for cell in doc.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", text="(ran)\n")]
    return doc


def exercise_cell_of(doc: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    pattern = re.compile(rf"^@exercise\s*\n(def|class) {name}\b", re.MULTILINE)
    cells = [c for c in doc.cells if c.cell_type == "code" and pattern.search(c.source)]
    if len(cells) != 1:
        raise ValueError(f"expected one cell defining {name}, found {len(cells)}")
    return cells[0]
