"""gradescope/<student>.json: each result in Gradescope's results.json format (one test per
exercise); the Gradescope bundle's ``run_autograder`` hands one of these to Gradescope."""

from __future__ import annotations

import json
from pathlib import Path

from ...untrusted.outcome import FAILED, PASSED, WORDS
from ..results import SubmissionResult
from ..store import write_atomically
from .names import file_names


def gradescope_json(r: SubmissionResult) -> dict:
    tests = [{"name": f"{e.id} ({WORDS.get(e.status, e.status)})", "score": e.score,
              "max_score": e.max_score, "status": PASSED if e.status == PASSED else FAILED,
              "output": e.feedback, "output_format": "text"} for e in r.exercises]
    output = r.error or f"Chapter {r.chapter}: {r.score:g} / {r.max_score:g}."
    if r.isolation != "namespaces":
        output += f"\n(Isolation while grading: {r.isolation}.)"
    return {"score": r.score, "execution_time": round(r.seconds, 2), "output": output, "tests": tests,
            "extra_data": {"seed": r.seed, "chapter": r.chapter, "isolation": r.isolation}}


def write(results: list[SubmissionResult], seed: int, out: Path) -> None:
    for r, name in zip(results, file_names(results)):
        write_atomically(out / "gradescope" / f"{name}.json", json.dumps(gradescope_json(r), indent=1))
