"""results.json: DESIGN.md's schema (``results.SubmissionResult.to_json``), for tools."""

from __future__ import annotations

import json
from pathlib import Path

from ..results import SubmissionResult, results_document
from ..store import write_atomically


def write(results: list[SubmissionResult], seed: int, out: Path) -> None:
    write_atomically(out / "results.json", json.dumps(results_document(results, seed), indent=1))
