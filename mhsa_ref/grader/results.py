"""The grade of one notebook, and its one serialised form.

``SubmissionResult.to_json()`` is the entry of ``results.json``'s ``submissions`` (DESIGN.md's
schema plus what an instructor needs to trust it: isolation, what was dropped, timings), and the
form the store keeps on disk; ``from_json`` reads it back. Nothing else writes or parses it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

GRADER_VERSION = "mhsa_ref-grader 1"


@dataclass
class ExerciseResult:
    id: str
    score: float
    max_score: float
    status: str  # one of mhsa_ref.untrusted.outcome.STATUSES
    misconception: str | None = None
    feedback: str = ""


@dataclass
class SubmissionResult:
    path: str
    student: str
    chapter: str | None
    score: float
    max_score: float
    exercises: list[ExerciseResult] = field(default_factory=list)
    seed: int | None = None
    isolation: str = "unknown"
    dropped: list[str] = field(default_factory=list)  # what extraction left out
    load_problems: list[str] = field(default_factory=list)  # kept statements that failed to run
    error: str | None = None  # the notebook could not be graded at all
    seconds: float = 0.0
    start_seconds: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["seconds"], d["start_seconds"] = round(self.seconds, 3), round(self.start_seconds, 3)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "SubmissionResult":
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["exercises"] = [ExerciseResult(**e) for e in d.get("exercises", [])]
        return cls(**values)


def results_document(results: list[SubmissionResult], seed: int) -> dict:
    """The whole ``results.json``."""
    return {"grader_version": GRADER_VERSION, "seed": seed, "submissions": [r.to_json() for r in results]}
