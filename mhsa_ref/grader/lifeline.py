"""Every process the grader starts dies with the one that started it, however that one ends.

A chain of parent-death signals (Linux's ``PR_SET_PDEATHSIG``): the forkserver dies with
``mhsa-grade`` (its preload, ``forkserver_preload``, calls ``arm`` on import), each
worker dies with the forkserver (``arm`` in the pool's initializer), each zygote with its worker
and each sandbox with its zygote (``untrusted/boot.py``). So a ``kill -9`` of ``mhsa-grade``
takes down, within moments, everything it started: without this the forkserver, the workers and
their zygotes (about 1 GB) lived on for minutes, grading for no one.

It also turns SIGINT and SIGTERM into ``Interrupted`` for ``mhsa-grade`` (``interruptible``).
Standard library only: the forkserver imports it before anything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT = "MHSA_GRADER_PID"  # the environment variable that tells the forkserver which pid started it


def arm(parent: int | None = None) -> bool:
    """Be sent SIGKILL when the parent dies, and die now if it already has (before this line
    ran: this process then has another parent). ``parent``: the pid that started this process,
    when known; else the parent at the time of the call. Returns False where Linux's prctl is
    not there (other systems)."""
    if not sys.platform.startswith("linux"):
        return False
    expected = os.getppid() if parent is None else parent
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != expected:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def worker_init() -> None:
    """A grader worker's initializer: die with the forkserver, and leave Ctrl-C to ``mhsa-grade``
    (a terminal sends SIGINT to every process of the group: a worker that took it would end a
    notebook half graded, and the main process ends the workers itself)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    arm()


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached ``mhsa-grade``. A BaseException, as KeyboardInterrupt is: no
    ``except Exception`` of the grader's may take it for a notebook's failure."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []


def requested() -> int | None:
    """The signal that asked this process to stop, if one did (checked before a result is kept,
    in case some ``except`` on the way swallowed ``Interrupted``)."""
    return _received[0] if _received else None


@contextlib.contextmanager
def interruptible():
    """While inside, SIGINT and SIGTERM raise ``Interrupted`` once; later ones are only noted
    (a second Ctrl-C must not break the clean-up the first one started)."""
    def handler(signum, frame):
        first = not _received
        _received.append(signum)
        if first:
            raise Interrupted(signum)

    _received.clear()
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _received.clear()  # a later batch in this process (a test, a notebook) starts afresh
