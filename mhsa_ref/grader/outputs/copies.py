"""copies.md and copies.html: possible copies, side by side, for a person to judge.

The findings come from ``grader/copies.py``; this only shows them. Student code is untrusted
text: in Markdown it sits in fences no line can close (``md_fence``) and names in code spans
(``md_code``); in HTML everything a submission wrote has its controls shown (``visible``) and
goes through ``html.escape``, in a page that may load and run nothing (its CSP).
"""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Callable
from pathlib import Path

from .. import copies
from ..copies import IDENTICAL, NEAR_PUBLISHED, PUBLISHED, CopiesReport, Entry, Finding
from ..results import BatchResults
from ..store import write_atomically
from .escape import md_code, md_fence, visible

MAX_COLUMNS = 4  # code shown side by side; further members of a group are listed by name

WHY = ("Nothing here changes a score: each finding is for a person to read, and each can have an "
       "innocent explanation (students who worked together as allowed, a hint from the same tutor, "
       "code from the book itself).")
HOW = ("Each exercise's code (its definition and the helpers it calls) was compared after renaming "
       "arguments, locals and helpers in order of appearance and dropping comments, docstrings, type "
       "hints and formatting; code the chapter's notebook gives every learner was left out. Code with "
       f"fewer than {copies.MIN_WRITTEN_TOKENS} tokens of the student's own was not compared: short "
       "exercises have few natural solutions, so identical code there is expected by chance. "
       f"\"Similar\" means that at least {copies.SIMILAR:.0%} of the {copies.SHINGLE}-token sequences "
       f"are shared, looked for only in code with {copies.MIN_SIMILAR_TOKENS} tokens of the student's own "
       "or more (in shorter code a few idioms make most of them).")


def _title(f: Finding) -> str:
    if f.kind == PUBLISHED:
        return f"reproduces the {f.known.label}"
    if f.kind == NEAR_PUBLISHED:
        return f"similar ({f.score:.0%}) to the {f.known.label}"
    if f.kind == IDENTICAL:
        return "identical code"
    return f"similar code ({f.score:.0%})"


def _same_as(f: Finding) -> str:
    return "The very same code is also the " + "; the ".join(f.same_as) + "."


def _members(f: Finding) -> list[Entry]:
    return f.entries + [e for side in f.also for e in side]


def _who(e: Entry, where: Callable[[str], str]) -> str:
    return f"{md_code(e.student)} ({md_code(where(e.path))})"


def markdown(report: CopiesReport, where: Callable[[str], str] = str) -> str:
    """The report in Markdown; ``where`` shows a notebook's path (relative to the class root)."""
    lines = ["# Possible copies", "", WHY, "", HOW, "", "Side by side: `copies.html`.", ""]
    lines += _scope(report, md=True)
    if not report.findings:
        lines += ["No identical or similar code was found.", ""]
    current = None
    for f in report.findings:
        if f.exercise != current:
            current = f.exercise
            lines += [f"## {f.exercise}", ""]
        members = _members(f)
        lines += [f"### {_title(f)}: {len(members)} submission{'s' if len(members) != 1 else ''}", ""]
        lines += [f"- {_who(e, where)}" for e in members] + [""]
        if f.same_as:
            lines += [_same_as(f), ""]
        if f.kind == IDENTICAL or f.kind == PUBLISHED:
            lines += ["Their code, normalised (what was compared):", "", md_fence(f.entries[0].normal, "python"), ""]
        else:
            for e in f.entries[:MAX_COLUMNS]:
                lines += [f"{_who(e, where)}, as graded:", "", md_fence(e.source, "python"), ""]
        if f.known is not None:
            lines += [f"The {f.known.label}:", "", md_fence(f.known.source, "python"), ""]
    return "\n".join(lines) + "\n"


def _scope(report: CopiesReport, md: bool) -> list[str]:
    """What was compared, and against which of the book's sources."""
    code = md_code if md else str  # HTML escapes every line of this where it is written
    lines = []
    if report.book_root is None:
        lines.append("The book's notebooks (`book/`, `solutions/`) were not found beside the installed package, "
                     "so given code could not be told apart from the students' own and the published solutions "
                     "were not compared; only the package's reference code was. Run the grader from a checkout "
                     "of the book to compare them.")
        lines.append("")
    ids = sorted(set(report.compared) | set(report.small) | set(report.given_only) | set(report.unrecorded))
    for ex_id in ids:
        known = ", ".join(report.known.get(ex_id, [])) or "none"
        missing = report.unrecorded.get(ex_id, 0)
        lines.append(f"- {ex_id}: {report.compared.get(ex_id, 0)} compared, {report.small.get(ex_id, 0)} too "
                     f"small to compare, {report.given_only.get(ex_id, 0)} only the given code"
                     + (f", {missing} not recorded (longer than {copies.MAX_RECORDED_CHARS:,} characters, or "
                        "graded by an older grader: grade again without --resume)" if missing else "")
                     + f"; against: {known}")
    if report.unreadable:
        lines.append(f"- {report.unreadable} recorded unit(s) could not be read and were not compared")
    lines += [f"- could not read {code(p)}" for p in report.problems]
    return lines + [""] if lines else lines


def _text(text: str) -> str:
    """Untrusted text for HTML: controls (bidirectional overrides included) shown, then escaped."""
    return html.escape("\n".join(visible(line) for line in str(text).split("\n")))


def _column(title: str, source: str) -> str:
    return f"<td><div class=who>{_text(title)}</div><pre>{_text(source)}</pre></td>"


def html_page(report: CopiesReport, where: Callable[[str], str] = str) -> str:
    # No script, image or request of any kind: the page shows students' text and nothing else runs.
    parts = ["<!doctype html><html><head><meta charset=utf-8><meta http-equiv=Content-Security-Policy "
             "content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>Possible copies</title><style>"
             "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;table-layout:fixed;width:100%}"
             "td{vertical-align:top;border:1px solid #bbb;padding:.4em}pre{white-space:pre-wrap;font-size:85%}"
             ".who{font-weight:bold}</style></head><body><h1>Possible copies</h1>",
             f"<p>{html.escape(WHY)}</p><p>{html.escape(HOW)}</p><ul>"]
    parts += [f"<li>{_text(line[2:])}</li>" for line in _scope(report, md=False) if line.startswith("- ")]
    parts.append("</ul>")
    if report.book_root is None:
        parts.append(f"<p>{html.escape(_scope(report, md=False)[0])}</p>")
    if not report.findings:
        parts.append("<p>No identical or similar code was found.</p>")
    current = None
    for f in report.findings:
        if f.exercise != current:
            current = f.exercise
            parts.append(f"<h2>{html.escape(f.exercise)}</h2>")
        members = _members(f)
        parts.append(f"<h3>{html.escape(_title(f))}: {len(members)} submission(s)</h3>")
        shown = f.entries[:MAX_COLUMNS - (f.known is not None)]
        cells = [_column(f"{e.student} ({where(e.path)})", e.source) for e in shown]
        if f.known is not None:
            cells.append(_column(f.known.label, f.known.source))
        parts.append("<table><tr>" + "".join(cells) + "</tr></table>")
        if f.same_as:
            parts.append(f"<p>{html.escape(_same_as(f))}</p>")
        rest = [e for e in members if e not in shown]
        if rest:
            parts.append("<p>Also: " + ", ".join(_text(f"{e.student} ({where(e.path)})") for e in rest) + "</p>")
        if f.kind in (IDENTICAL, PUBLISHED):  # one normal form for all of them
            parts.append(f"<details><summary>normalised (what was compared)</summary><pre>"
                         f"{_text(f.entries[0].normal)}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _below_root(path: str, roots: list[str]) -> str:
    """The notebook's path below the class root it was found under (as summary.md shows it)."""
    for root in roots:
        try:
            return Path(os.path.realpath(path)).relative_to(root).as_posix()
        except ValueError:
            continue
    return path


def write(batch: BatchResults, out: Path) -> None:
    report = copies.find_copies(batch.submissions)
    where = functools.partial(_below_root, roots=batch.roots)
    write_atomically(out / "copies.md", markdown(report, where))
    write_atomically(out / "copies.html", html_page(report, where))
