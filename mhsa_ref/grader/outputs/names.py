"""File names for per-student outputs: ``<student>/<chapter>``, so that a person finds a student's
chapter by looking (``feedback/alice/01.md``, ``gradescope/alice/01.json``).

A student id may hold anything a file name can (it comes from the class folder's layout), so a
name is the id itself only where that is safe everywhere: plain characters, not a name Windows
reserves, and no other student's id equal to it without case (``Alice`` and ``alice`` are one
folder on macOS and Windows). Any other id becomes its sanitised form plus ``~`` and a hash of
the whole id. ``~`` never occurs in a plain name, so no id can be chosen to land on another's
hashed folder, and the hash is long enough (64 bits) that no two ids share one by search.

Inside a student's folder a chapter is ``01``; when several notebooks claim one student for one
chapter (``claimed_twice``), each is ``01~<notebook>~<hash of its path>``, side by side, and
summary.md lists which file is which notebook.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from ..results import SubmissionResult

HASHED = "~"  # only in hashed names: safe_name never keeps it
UNKNOWN_CHAPTER = "unknown-chapter"  # a notebook whose chapter could not be told
# Windows refuses these as file names, whatever the extension (CON.md is CON).
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}


def file_names(results: list[SubmissionResult]) -> list[str]:
    """One distinct ``<student>/<chapter>`` per result (a POSIX relative path without an
    extension), distinct also without case."""
    students = sorted({r.student for r in results})
    plain = Counter(s.casefold() for s in students if _is_plain(s))
    folder = {s: s if _is_plain(s) and plain[s.casefold()] == 1 else _hashed(s) for s in students}
    groups = Counter((r.student, r.chapter) for r in results)
    names = []
    for r in results:
        chapter = _chapter_name(r.chapter)
        if groups[(r.student, r.chapter)] > 1:  # claimed twice: each notebook beside the other
            # The path's end (its last folders and name, which tell the two apart), made safe.
            stem = safe_name(re.sub(r"\.ipynb$", "", r.path)[-40:])
            chapter = f"{chapter}{HASHED}{stem}{HASHED}{_digest(r.path, 12)}"
        names.append(f"{folder[r.student]}/{chapter}")
    return _distinct(names)


def safe_name(student: str) -> str:
    """A file name for a student id (ids come from file names, which may hold anything)."""
    name = re.sub(r"[^A-Za-z0-9._@-]+", "_", student).strip("._") or "student"
    return name[:100]


def _is_plain(name: str) -> bool:
    return safe_name(name) == name and name.split(".")[0].upper() not in _RESERVED


def _hashed(name: str) -> str:
    return f"{safe_name(name)[:60]}{HASHED}{_digest(name, 16)}"


def _chapter_name(chapter: str | None) -> str:
    if chapter is None:
        return UNKNOWN_CHAPTER
    return chapter if _is_plain(chapter) else _hashed(chapter)


def _digest(text: str, n: int) -> str:
    # (an id from a file name that is not UTF-8 holds surrogates: encoded back to its bytes)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:n]


def _distinct(names: list[str]) -> list[str]:
    """The names, any that still meet another without case numbered apart. By construction this
    changes nothing; it is what makes "two results never share a file" hold whatever comes in."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, i = name, 1
        while candidate.casefold() in seen:
            i += 1
            candidate = f"{name}{HASHED}{i}"
        seen.add(candidate.casefold())
        out.append(candidate)
    return out
