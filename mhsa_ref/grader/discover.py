"""Which notebooks to grade, whose they are, and which chapter each one is.

Chapter: the notebook's own metadata (stamped by the generator), else a chapter number in the
file name (so "Copy of 01_attention_numpy.ipynb" from Colab still works), else ``--chapter``.
Student: the folder after ``submitted/`` in nbgrader's ``submitted/<student>/<assignment>/``
layout; else the student's own folder inside a folder of submissions; else the file's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..notebooks import COPY_PREFIX, chapter_in_metadata, chapter_in_name


@dataclass(frozen=True)
class Submission:
    path: Path
    student: str
    key: str  # unique within a batch: the path relative to the folder it was found in


def find(paths: list[str | Path]) -> list[Submission]:
    """Every notebook under ``paths`` (files or folders), in a stable order."""
    found: list[Submission] = []
    for arg in paths:
        arg = Path(arg)
        if arg.is_file():
            found.append(Submission(arg, student_of(arg, arg.parent), arg.name))
        elif arg.is_dir():
            for nb in sorted(arg.rglob("*.ipynb")):
                if ".ipynb_checkpoints" in nb.parts or any(p.startswith(".") for p in nb.relative_to(arg).parts):
                    continue
                found.append(Submission(nb, student_of(nb, arg), str(nb.relative_to(arg))))
        else:
            raise FileNotFoundError(f"no such notebook or folder: {arg}")
    keys = [s.key for s in found]
    if len(set(keys)) != len(keys):
        found = [Submission(s.path, s.student, str(s.path.resolve())) for s in found]
    return found


def student_of(path: Path, root: Path) -> str:
    parts = path.resolve().parts
    if "submitted" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("submitted")
        if i + 1 < len(parts) - 1:
            return parts[i + 1]
    try:
        relative = path.resolve().relative_to(root.resolve()).parts
    except ValueError:
        relative = (path.name,)
    if len(relative) > 1:
        return relative[0]
    return COPY_PREFIX.sub("", path.stem).strip() or path.stem


def chapter_of(nb: Any, path: Path, known: set[str], fallback: str | None = None) -> str | None:
    chapter = chapter_in_metadata(nb)
    if chapter in known:
        return chapter
    named = chapter_in_name(path.name)
    if named in known:
        return named
    return fallback if fallback in known else None
