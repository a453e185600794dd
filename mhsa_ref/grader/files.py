"""Reading a submitted file without trusting what kind of file it is.

A class folder is written by students (or unpacked from their archives): a "notebook" may be a
folder, a FIFO that blocks the reader forever, a symbolic link to ``/dev/zero`` or to another
student's or the instructor's files. The grader reads only regular files, opened without
following a final symbolic link and without blocking, checked with ``fstat`` after opening (so a
file swapped after discovery is still caught), and never more than a size limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotReadable(OSError):
    """A path the grader will not read; ``reason`` says why in words for the results."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def kind_of(mode: int) -> str:
    """What a file is, in words (for a path the grader skips)."""
    for test, words in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a regular file"


def inside(path: Path, root: Path) -> bool:
    """Is ``path``, all its symbolic links resolved, inside ``root`` (also resolved)?"""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
        return True
    except ValueError:
        return False


def read_regular(path: Path, max_bytes: int, root: Path | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes`` (inside ``root``
    when given); else ``NotReadable`` saying why. Never blocks and never follows a final link."""
    path = Path(path)
    if root is not None and not inside(path, root):
        raise NotReadable(path, f"it lies outside the submission folder {root}")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            raise NotReadable(path, "a symbolic link (the grader does not follow links)") from None
        raise NotReadable(path, f"cannot be opened ({exc.strerror or type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable(path, f"{kind_of(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise NotReadable(path, f"{info.st_size:,} bytes; the grader reads at most {max_bytes:,}")
        chunks, total = [], 0
        while total <= max_bytes:  # the size may have grown since fstat: read one byte past the limit
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise NotReadable(path, f"more than {max_bytes:,} bytes; the grader reads at most {max_bytes:,}")
        return b"".join(chunks)
    finally:
        os.close(fd)
