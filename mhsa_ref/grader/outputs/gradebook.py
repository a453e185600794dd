"""gradebook.csv: one row per student and exercise, for spreadsheets and LMS imports."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ...untrusted.outcome import ERROR
from ..results import BatchResults, SubmissionResult
from ..store import write_atomically
from .escape import csv_cell

COLUMNS = ["student", "notebook", "chapter", "exercise", "status", "score", "max_score", "misconception"]


def gradebook_csv(results: list[SubmissionResult]) -> str:
    rows = [COLUMNS]
    for r in results:
        if r.error:
            rows.append([r.student, r.path, r.chapter or "", "", ERROR, 0, r.max_score, ""])
        for e in r.exercises:
            rows.append([r.student, r.path, r.chapter, e.id, e.status, e.score, e.max_score, e.misconception or ""])
    out = io.StringIO()
    csv.writer(out).writerows([[csv_cell(v) for v in row] for row in rows])
    return out.getvalue()


def write(batch: BatchResults, out: Path) -> None:
    write_atomically(out / "gradebook.csv", gradebook_csv(batch.submissions))
