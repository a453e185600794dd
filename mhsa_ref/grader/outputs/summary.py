"""summary.md and summary.png: the class at a glance, misconceptions counted across students."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ... import exercises
from ...judge import COMMON_MISCONCEPTIONS
from ...untrusted.outcome import STATUSES
from ..results import SubmissionResult
from ..store import write_atomically


def summary(results: list[SubmissionResult]) -> tuple[str, Counter]:
    """A class summary in Markdown, and the misconception counts (students, not submissions)."""
    students = sorted({r.student for r in results})
    n = len(students)
    misconceptions: Counter = Counter()
    statuses: dict[str, Counter] = {}
    for student in students:
        seen = set()
        for r in (r for r in results if r.student == student):
            for e in r.exercises:
                statuses.setdefault(e.id, Counter())[e.status] += 1
                if e.misconception:
                    seen.add((e.id, e.misconception))
        misconceptions.update(seen)
    lines = ["# Class summary", "", f"{n} student{'s' if n != 1 else ''}, {len(results)} notebook"
             f"{'s' if len(results) != 1 else ''}.", ""]
    if results:
        mean = sum(r.score for r in results) / len(results)
        top = max(r.max_score for r in results)
        lines += [f"Mean score {mean:.2f} of {top:g}.", ""]
    lines += ["## Exercises", "", "| exercise | " + " | ".join(STATUSES) + " |",
              "|---|" + "---|" * len(STATUSES)]
    for ex_id, counts in sorted(statuses.items()):
        lines.append(f"| {ex_id} | " + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |")
    lines += ["", "## Misconceptions", ""]
    if not misconceptions:
        lines.append("No known misconception was found.")
    for (ex_id, mid), count in misconceptions.most_common():
        lines.append(f"- **{count} of {n}** {_describe(ex_id, mid)} (`{mid}`, {ex_id})")
    return "\n".join(lines) + "\n", misconceptions


def _describe(ex_id: str, mid: str) -> str:
    """The first sentence of the misconception's feedback, as the summary's words."""
    ex = exercises.REGISTRY.get(ex_id)
    mis = (ex.misconception(mid) if ex else None)
    if mis is None:
        mis = COMMON_MISCONCEPTIONS.get(mid)
    if mis is None:
        return mid
    return re.split(r"(?<=[.:;])\s", mis.message, maxsplit=1)[0].rstrip(".:;")


def summary_chart(counts: Counter, n_students: int, path: Path) -> bool:
    """A bar chart of misconception counts; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    items = counts.most_common()[:20][::-1]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.4 * max(1, len(items))), layout="constrained")
    ax.barh([f"{mid} ({ex_id})" for (ex_id, mid), _ in items], [c for _, c in items], color="#0072B2")
    ax.set_xlabel(f"students (of {n_students})")
    ax.set_ylabel("misconception (exercise)")
    ax.set_title("Misconceptions found across the class")
    ax.set_xlim(0, max(1, n_students))
    if not items:
        ax.text(0.5, 0.5, "no known misconception found", transform=ax.transAxes, ha="center")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write(results: list[SubmissionResult], seed: int, out: Path) -> None:
    text, counts = summary(results)
    write_atomically(out / "summary.md", text)
    students = len({r.student for r in results})
    if students > 1:  # a chart of one student says nothing, and drawing it costs most of a one-notebook run
        summary_chart(counts, students, out / "summary.png")
