"""Report: the results in every form people read them.

- ``results.json``: DESIGN.md's schema, for tools;
- ``gradebook.csv``: one row per student and exercise, for spreadsheets and LMS imports;
- ``feedback/<student>.md`` and ``.html``: written for the learner;
- ``gradescope/<student>.json``: Gradescope's results.json;
- ``summary.md`` and ``summary.png``: the class at a glance, misconceptions counted across students.

Everything a submission produced (error messages, type names) is untrusted text: it is escaped
in HTML and fenced in Markdown, never interpreted.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

from .. import exercises
from ..judge import COMMON_MISCONCEPTIONS
from .grade import STATUS_WORDS, SubmissionResult

GRADER_VERSION = "mhsa_ref-grader 1"
def write_atomically(path: Path, text: str | bytes) -> None:
    """Write via a temporary file and rename: a reader (or a kill -9) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode() if isinstance(text, str) else text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def results_json(results: list[SubmissionResult], seed: int) -> dict:
    subs = []
    for r in results:
        d = {"path": r.path, "student": r.student, "chapter": r.chapter, "score": r.score,
             "max_score": r.max_score,
             "exercises": [{"id": e.id, "score": e.score, "max_score": e.max_score, "status": e.status,
                            "misconception": e.misconception, "feedback": e.feedback} for e in r.exercises],
             "isolation": r.isolation, "error": r.error, "dropped": r.dropped,
             "load_problems": r.load_problems, "seconds": round(r.seconds, 3),
             "start_seconds": round(r.start_seconds, 3)}
        subs.append(d)
    return {"grader_version": GRADER_VERSION, "seed": seed, "submissions": subs}


def _cell(value: object) -> object:
    """A spreadsheet cell that cannot be a formula: ids and paths come from file names."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def gradebook_csv(results: list[SubmissionResult]) -> str:
    rows = [["student", "notebook", "chapter", "exercise", "status", "score", "max_score", "misconception"]]
    for r in results:
        if r.error:
            rows.append([r.student, r.path, r.chapter or "", "", "error", 0, r.max_score, ""])
        for e in r.exercises:
            rows.append([r.student, r.path, r.chapter, e.id, e.status, e.score, e.max_score, e.misconception or ""])
    out = io.StringIO()
    csv.writer(out).writerows([[_cell(v) for v in row] for row in rows])
    return out.getvalue()


def _fence(text: str) -> str:
    """``text`` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def feedback_markdown(r: SubmissionResult) -> str:
    lines = [f"# Feedback: chapter {r.chapter or '?'}", "",
             f"Notebook: `{Path(r.path).name}`  ", f"Score: **{r.score:g} / {r.max_score:g}**", ""]
    if r.error:
        lines += ["This notebook could not be graded:", "", _fence(r.error), ""]
    for e in r.exercises:
        lines += [f"## {e.id}: {STATUS_WORDS.get(e.status, e.status)} ({e.score:g} / {e.max_score:g})", ""]
        if e.status != "passed":
            lines += [_fence(e.feedback), ""]
    if r.load_problems:
        lines += ["## Top-level code that failed while loading", "",
                  "The grader runs your imports, definitions and simple assignments. These failed:", "",
                  _fence("\n".join(r.load_problems)), ""]
    if r.dropped:
        lines += [f"The grader did not run {len(r.dropped)} top-level statements (plots, `check` calls, "
                  "loops and the like); it only needs your definitions.", ""]
    lines += [f"Graded with seed {r.seed}; the cases are the public ones from the notebook plus "
              "randomized ones drawn from that seed.", ""]
    return "\n".join(lines)


def feedback_html(r: SubmissionResult) -> str:
    esc = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>Feedback: {esc(r.student)}</title>",
             "<style>body{font-family:sans-serif;max-width:50rem;margin:auto;padding:1rem}"
             "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}</style>",
             f"<h1>Feedback: chapter {esc(r.chapter or '?')}</h1>",
             f"<p>Notebook: <code>{esc(Path(r.path).name)}</code><br>Score: <b>{r.score:g} / {r.max_score:g}</b></p>"]
    if r.error:
        parts.append(f"<p>This notebook could not be graded:</p><pre>{esc(r.error)}</pre>")
    for e in r.exercises:
        parts.append(f"<h2>{esc(e.id)}: {esc(STATUS_WORDS.get(e.status, e.status))} "
                     f"({e.score:g} / {e.max_score:g})</h2>")
        if e.status != "passed":
            parts.append(f"<pre>{esc(e.feedback)}</pre>")
    if r.load_problems:
        parts.append("<h2>Top-level code that failed while loading</h2><pre>"
                     + esc("\n".join(r.load_problems)) + "</pre>")
    parts.append(f"<p>Graded with seed {r.seed}.</p>")
    return "\n".join(parts) + "\n"


def gradescope_json(r: SubmissionResult) -> dict:
    tests = [{"name": f"{e.id} ({STATUS_WORDS.get(e.status, e.status)})", "score": e.score,
              "max_score": e.max_score, "status": "passed" if e.status == "passed" else "failed",
              "output": e.feedback, "output_format": "text"} for e in r.exercises]
    output = r.error or f"Chapter {r.chapter}: {r.score:g} / {r.max_score:g}."
    if r.isolation != "namespaces":
        output += f"\n(Isolation while grading: {r.isolation}.)"
    return {"score": r.score, "execution_time": round(r.seconds, 2), "output": output, "tests": tests,
            "extra_data": {"seed": r.seed, "chapter": r.chapter, "isolation": r.isolation}}


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
    lines += ["## Exercises", "", "| exercise | " + " | ".join(STATUS_WORDS) + " |",
              "|---|" + "---|" * len(STATUS_WORDS)]
    for ex_id, counts in sorted(statuses.items()):
        lines.append(f"| {ex_id} | " + " | ".join(str(counts.get(s, 0)) for s in STATUS_WORDS) + " |")
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


def write_all(results: list[SubmissionResult], seed: int, out: Path) -> dict:
    """Write every report into ``out``; return the JSON document."""
    doc = results_json(results, seed)
    write_atomically(out / "results.json", json.dumps(doc, indent=1))
    write_atomically(out / "gradebook.csv", gradebook_csv(results))
    for r, name in zip(results, file_names(results)):
        write_atomically(out / "feedback" / f"{name}.md", feedback_markdown(r))
        write_atomically(out / "feedback" / f"{name}.html", feedback_html(r))
        write_atomically(out / "gradescope" / f"{name}.json", json.dumps(gradescope_json(r), indent=1))
    text, counts = summary(results)
    write_atomically(out / "summary.md", text)
    summary_chart(counts, len({r.student for r in results}), out / "summary.png")
    return doc


def file_names(results: list[SubmissionResult]) -> list[str]:
    """One distinct, safe file name per result: the student id itself where that is a safe and
    unique file name, else the sanitised id plus a hash of the notebook's path (so that no id
    can be chosen to land on another student's file)."""
    plain = Counter(r.student for r in results if safe_name(r.student) == r.student)
    return [r.student if plain.get(r.student) == 1
            else f"{safe_name(r.student)}-{hashlib.sha256(r.path.encode()).hexdigest()[:8]}"
            for r in results]


def safe_name(student: str) -> str:
    """A file name for a student id (ids come from file names, which may hold anything)."""
    name = re.sub(r"[^A-Za-z0-9._@-]+", "_", student).strip("._") or "student"
    return name[:100]
