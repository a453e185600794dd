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
    # Scoring (``grader/points.py``): ``score`` is what counts, the override's when there is one,
    # else ``points``, what the checks earned; ``max_points`` (= ``max_score``) is the configured
    # maximum. ``parts``: {"name", "passed", "points", "max_points"} per declared part.
    points: float = 0.0
    max_points: float = 0.0
    parts: list[dict] = field(default_factory=list)
    override: dict | None = None  # {"score", "comment", "file", "line", "clamped_from"}


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
    chapter_source: str = ""  # who decided the chapter: "configured", "notebook metadata", "file name"
    identified_by: str = ""  # how the student was read from the class folder's layout
    # Exercises of other chapters the notebook defines: graded nowhere, worth nothing here.
    other_chapter_exercises: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the instructor should know (e.g. two claims)
    exercise_code: dict[str, str] = field(default_factory=dict)  # id -> its definitions as run (copies.py)

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


@dataclass
class BatchResults:
    """A batch as its outputs see it: the results, and what the batch knows beyond them."""

    seed: int
    submissions: list[SubmissionResult]
    roots: list[str] = field(default_factory=list)  # the class roots students were identified under
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}: every path not graded
    claimed_twice: list[dict] = field(default_factory=list)  # {"student", "chapter", "paths"}
    points_file: str | None = None  # the --points file the scores follow (None: the registry's points)
    overrides_file: str | None = None
    override_warnings: list[str] = field(default_factory=list)  # overrides not applied, or clamped
    grader_failures: list[dict] = field(default_factory=list)  # {"path", "student", "error"}: not results
    # Ids that differ only in case or Unicode form ("Alice", "alice"): distinct here, but one user
    # to an LMS that matches logins without case, whose import would keep only one of the rows.
    ids_alike: list[list[str]] = field(default_factory=list)

    def to_json(self) -> dict:
        """The whole ``results.json``."""
        return {"grader_version": GRADER_VERSION, "seed": self.seed,
                "submissions": [r.to_json() for r in self.submissions], "roots": list(self.roots),
                "skipped": list(self.skipped), "claimed_twice": list(self.claimed_twice),
                "points_file": self.points_file, "overrides_file": self.overrides_file,
                "override_warnings": list(self.override_warnings),
                "grader_failures": list(self.grader_failures), "ids_alike": [list(g) for g in self.ids_alike]}


def results_document(results: list[SubmissionResult], seed: int) -> dict:
    """``results.json`` for results without a batch around them."""
    return BatchResults(seed, results).to_json()
