"""feedback/<student>/<chapter>.md and .html (``names.file_names``): each learner's grade, written for the learner.

Everything that came from the submission (its file name, messages, notes naming paths) goes
through ``escape``: inline code spans and fences in Markdown, ``html.escape`` in HTML.
"""

from __future__ import annotations

import html
from pathlib import Path

from ...untrusted.outcome import PASSED, WORDS
from ..points import scoring_lines
from ..results import BatchResults, SubmissionResult
from ..store import write_atomically
from .escape import md_code, md_fence, visible
from .names import file_names
from .stale import remove_stale


def _other_chapters(r: SubmissionResult) -> str:
    return (f"Your notebook also defines {', '.join(r.other_chapter_exercises)}: exercises of another chapter, "
            f"not part of this chapter {r.chapter} assignment, so they earn nothing here.")


def feedback_markdown(r: SubmissionResult) -> str:
    lines = [f"# Feedback: chapter {r.chapter or '?'}", "",  # the grader's chapter, not the notebook's
             f"Notebook: {md_code(Path(r.path).name)}  ", f"Score: **{r.score:g} / {r.max_score:g}**", ""]
    if r.error:
        lines += ["This notebook could not be graded:", "", md_fence(r.error), ""]
    for e in r.exercises:
        lines += [f"## {e.id}: {WORDS.get(e.status, e.status)} ({e.score:g} / {e.max_score:g})", ""]
        said, comment = scoring_lines(e)
        lines += [f"- {line}" for line in said] + ([""] if said else [])
        lines += ["Comment from your instructor:", "", md_fence(comment), ""] if comment else []
        if e.status != PASSED:
            lines += [md_fence(e.feedback), ""]
    if r.other_chapter_exercises:
        lines += [_other_chapters(r), ""]
    if r.notes:
        lines += ["Notes from the grader:", "", md_fence("\n".join(r.notes)), ""]
    if r.load_problems:
        lines += ["## Top-level code that failed while loading", "",
                  "The grader runs your imports, definitions and simple assignments. These failed:", "",
                  md_fence("\n".join(r.load_problems)), ""]
    if r.dropped:
        lines += [f"The grader did not run {len(r.dropped)} top-level statements (plots, `check` calls, "
                  "loops and the like); it only needs your definitions.", ""]
    lines += [f"Graded with seed {r.seed}; the cases are the public ones from the notebook plus "
              "randomized ones drawn from that seed.", ""]
    return "\n".join(lines)


def feedback_html(r: SubmissionResult) -> str:
    def esc(text: object) -> str:
        return html.escape(str(text), quote=True)

    parts = [f"<!doctype html><meta charset='utf-8'><title>Feedback: {esc(visible(r.student))}</title>",
             "<style>body{font-family:sans-serif;max-width:50rem;margin:auto;padding:1rem}"
             "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}</style>",
             f"<h1>Feedback: chapter {esc(r.chapter or '?')}</h1>",
             f"<p>Notebook: <code>{esc(visible(Path(r.path).name))}</code><br>Score: <b>{r.score:g} / {r.max_score:g}</b></p>"]
    if r.error:
        parts.append(f"<p>This notebook could not be graded:</p><pre>{esc(r.error)}</pre>")
    for e in r.exercises:
        parts.append(f"<h2>{esc(e.id)}: {esc(WORDS.get(e.status, e.status))} "
                     f"({e.score:g} / {e.max_score:g})</h2>")
        said, comment = scoring_lines(e)
        parts += [f"<ul>{''.join(f'<li>{esc(line)}</li>' for line in said)}</ul>"] if said else []
        parts += [f"<p>Comment from your instructor:</p><pre>{esc(comment)}</pre>"] if comment else []
        if e.status != PASSED:
            parts.append(f"<pre>{esc(e.feedback)}</pre>")
    if r.other_chapter_exercises:
        parts.append(f"<p>{esc(_other_chapters(r))}</p>")
    if r.notes:
        parts.append("<p>Notes from the grader:</p><pre>" + esc("\n".join(r.notes)) + "</pre>")
    if r.load_problems:
        parts.append("<h2>Top-level code that failed while loading</h2><pre>"
                     + esc("\n".join(r.load_problems)) + "</pre>")
    parts.append(f"<p>Graded with seed {r.seed}.</p>")
    return "\n".join(parts) + "\n"


def write(batch: BatchResults, out: Path) -> None:
    results, written = batch.submissions, set()
    for r, name in zip(results, file_names(results)):
        for path, text in ((out / "feedback" / f"{name}.md", feedback_markdown(r)),
                           (out / "feedback" / f"{name}.html", feedback_html(r))):
            write_atomically(path, text)
            written.add(path)
    remove_stale(out / "feedback", written, (".md", ".html"))
