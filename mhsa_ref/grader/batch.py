"""Batches: grade many notebooks in parallel, survive anything, resume after being killed.

Each submission's result goes to the store (``store.py``) the moment it is known, and the
reports are then written from the results (``outputs/``). A killed batch (even ``kill -9``)
therefore loses at most the submissions that were in flight, and ``--resume`` grades exactly
those: a result counts as done only for the same file contents, seed and chapter override.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from . import discover
from .grade import grade_notebook
from .outputs import write_all
from .results import SubmissionResult
from .run import Limits
from .store import Store, fingerprint


_CONTEXT = multiprocessing.get_context("forkserver")


def grade_batch(paths: list[str | Path], out: Path, jobs: int = 1, seed: int | None = None,
                limits: Limits = Limits(), resume: bool = False, chapter: str | None = None,
                progress: bool = True) -> dict:
    out = Path(out)
    store = Store(out)
    seed = store.start(seed, chapter, resume, new_seed=lambda: secrets.randbelow(2**31))
    submissions = discover.find(paths)
    todo, done = [], {}
    for sub in submissions:
        fingerprint_ = fingerprint(sub.path, seed, chapter)
        saved = store.load(sub.key, fingerprint_) if resume else None
        if saved is not None:
            done[sub.key] = saved
        else:
            todo.append((sub, fingerprint_))
    for key, result in _run(todo, store, seed, limits, chapter, jobs, progress):
        done[key] = result
    results = [done[s.key] for s in submissions if s.key in done]
    return write_all(results, seed, out)


def _run(todo, store, seed, limits, chapter, jobs, progress):
    bar = _progress(len(todo), progress)
    if len(todo) == 1:  # one notebook (Gradescope's case): no worker pool to start
        sub, fingerprint_ = todo[0]
        yield sub.key, _grade_one(sub, store, fingerprint_, seed, limits, chapter)
        bar.update(1)
        bar.close()
        return
    attempts: dict[str, int] = {}
    while todo:
        pending = {}
        try:
            # Not fork: a process that has run PyTorch holds an OpenMP thread team, and a forked
            # copy of it hangs in its first matrix product. Forkserver workers start clean.
            with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=_CONTEXT) as pool:
                for item in todo:
                    sub, fingerprint_ = item
                    pending[pool.submit(_grade_one, sub, store, fingerprint_, seed, limits, chapter)] = item
                for future in as_completed(pending):
                    sub = pending[future][0]
                    yield sub.key, future.result()
                    bar.update(1)
            todo = []
        except BrokenProcessPool:
            # A grader process died (this should not happen: student code runs elsewhere). Try the
            # unfinished ones again in a fresh pool, then give each up with an error result.
            unfinished = [item for f, item in pending.items() if not f.done() or f.exception()]
            todo = []
            for item in unfinished:
                sub, fingerprint_ = item
                attempts[sub.key] = attempts.get(sub.key, 0) + 1
                if attempts[sub.key] < 2:
                    todo.append(item)
                else:
                    result = SubmissionResult(str(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
                                              error="the grader itself failed on this notebook")
                    store.save(sub.key, fingerprint_, result)
                    bar.update(1)
                    yield sub.key, result
    bar.close()


def _grade_one(sub: discover.Submission, store: Store, fingerprint_: str, seed: int, limits: Limits,
               chapter: str | None) -> SubmissionResult:
    try:
        result = grade_notebook(sub.path, sub.student, seed, limits, chapter)
    except Exception as exc:  # a grader bug must cost one result, not the batch
        result = SubmissionResult(str(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
                                  error=f"the grader failed on this notebook: {type(exc).__name__}: {exc}")
    store.save(sub.key, fingerprint_, result)
    return result


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, enabled: bool):
    if not enabled or total == 0:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, unit="notebook", file=sys.stderr, disable=not sys.stderr.isatty() and
                os.environ.get("MHSA_GRADE_PROGRESS") != "1")
