"""File names for per-student outputs: a student id may hold anything a file name can."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from ..results import SubmissionResult


def file_names(results: list[SubmissionResult]) -> list[str]:
    """One distinct, safe file name per result: the student id itself where that is a safe and
    unique file name, else the sanitised id plus a hash of the notebook's path (so that no id
    can be chosen to land on another student's file)."""
    # Counted without case: "Alice" and "alice" are one file name on macOS and Windows.
    plain = Counter(r.student.casefold() for r in results if safe_name(r.student) == r.student)
    return [r.student if plain.get(r.student.casefold()) == 1
            else f"{safe_name(r.student)}-{hashlib.sha256(r.path.encode()).hexdigest()[:8]}"
            for r in results]


def safe_name(student: str) -> str:
    """A file name for a student id (ids come from file names, which may hold anything)."""
    name = re.sub(r"[^A-Za-z0-9._@-]+", "_", student).strip("._") or "student"
    return name[:100]
