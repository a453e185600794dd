"""Per-student files of an earlier run, removed once this run's are written.

feedback/ and gradescope/ hold one file per student and chapter. A run into a folder that an
earlier run wrote (a regrade after a student was renamed, a notebook removed, a claim resolved)
would otherwise leave that run's files beside this one's, where a person, or a script mailing
feedback, takes them for current. Only files of the writer's own kinds are removed, never through a
link, and folders left empty after that.
"""

from __future__ import annotations

import os
from pathlib import Path


def remove_stale(folder: Path, written: set[Path], suffixes: tuple[str, ...]) -> None:
    """Remove every file under ``folder`` with one of ``suffixes`` that is not in ``written``."""
    keep = {os.path.abspath(p) for p in written}
    for top, dirs, files in os.walk(folder, topdown=False):  # never follows a link to a folder
        for name in files:
            path = os.path.join(top, name)
            if name.endswith(suffixes) and os.path.abspath(path) not in keep:
                os.unlink(path)  # a link is removed itself, not what it points to
        if top != str(folder) and not os.listdir(top):
            os.rmdir(top)
