"""summary.md and summary.png: the class at a glance, misconceptions counted across students."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from ... import diagnoses, exercises
from ...judge import COMMON_MISCONCEPTIONS
from ...untrusted.outcome import STATUSES
from ..results import BatchResults, SubmissionResult
from ..store import write_atomically
from .escape import md_code


def summary(results: list[SubmissionResult], batch: BatchResults | None = None) -> tuple[str, Counter]:
    """A class summary in Markdown, and the misconception counts (students, not submissions).
    Names, paths and reasons that came from the class folder are shown as inline code spans."""
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
    lines += _batch_sections(results, batch)
    return "\n".join(lines) + "\n", misconceptions


MAX_LISTED = 500  # skipped paths listed here; results.json lists every one


def _batch_sections(results: list[SubmissionResult], batch: BatchResults | None) -> list[str]:
    """Who is who and why, what was not graded, and what no one configured."""
    lines: list[str] = []
    if batch is not None and batch.claimed_twice:
        lines += ["", "## Students claimed by more than one notebook", "",
                  "Each notebook was graded and reported on its own; none replaced another. Decide which counts.", ""]
        for claim in batch.claimed_twice:
            lines.append(f"- {md_code(claim['student'])}, chapter {claim['chapter']}: "
                         + ", ".join(md_code(p) for p in claim["paths"]))
    if batch is not None and batch.skipped:
        lines += ["", "## Paths not graded", ""]
        lines += [f"- {md_code(s['path'])}: {md_code(s['reason'])}" for s in batch.skipped[:MAX_LISTED]]
        if len(batch.skipped) > MAX_LISTED:
            lines.append(f"- and {len(batch.skipped) - MAX_LISTED} more (all of them are in results.json, `skipped`)")
    chosen = [r for r in results if r.chapter_source and r.chapter_source != "configured"]
    if chosen:
        lines += ["", "## Chapters not configured", "",
                  f"No chapter was given (`--chapter`), so {len(chosen)} notebook(s) were graded as the chapter "
                  "their own metadata or file name suggests:", ""]
        lines += [f"- {md_code(r.student)} ({md_code(Path(r.path).name)}): chapter {r.chapter}, from its "
                  f"{r.chapter_source}" for r in chosen]
    others = [r for r in results if r.other_chapter_exercises]
    if others:
        lines += ["", "## Exercises of another chapter (graded nowhere, worth nothing)", ""]
        lines += [f"- {md_code(r.student)}: " + ", ".join(r.other_chapter_exercises) for r in others]
    lines += ["", "## How students were identified", ""]
    if batch is not None and batch.roots:
        lines += [f"Class root{'s' if len(batch.roots) > 1 else ''}: {', '.join(md_code(r) for r in batch.roots)}.", ""]
    lines += [f"- {md_code(r.student)}: {r.identified_by or 'as given'} ({md_code(_relative(r.path, batch))})"
              for r in results]
    return lines


def _relative(path: str, batch: BatchResults | None) -> str:
    for root in batch.roots if batch else []:
        try:
            return Path(os.path.realpath(path)).relative_to(root).as_posix()
        except ValueError:
            continue
    return path


def _describe(ex_id: str, mid: str) -> str:
    """The first sentence of the misconception's feedback, as the summary's words."""
    ex = exercises.REGISTRY.get(ex_id)
    mis = (ex.misconception(mid) if ex else None)
    if mis is None:
        mis = COMMON_MISCONCEPTIONS.get(mid)
    if mis is None:  # a generic diagnosis (mhsa_ref/diagnoses/), named by kind rather than listed
        return diagnoses.describe(mid) or mid
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


def write(batch: BatchResults, out: Path) -> None:
    results = batch.submissions
    text, counts = summary(results, batch)
    write_atomically(out / "summary.md", text)
    students = len({r.student for r in results})
    if students > 1:  # a chart of one student says nothing, and drawing it costs most of a one-notebook run
        summary_chart(counts, students, out / "summary.png")
