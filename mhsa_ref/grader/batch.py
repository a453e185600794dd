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
from dataclasses import asdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from . import discover
from .grade import grade_notebook
from .outputs import write_all
from .points import Overrides, PointsTable, apply as apply_points
from .files import shown
from .results import BatchResults, SubmissionResult
from .run import Limits
from .store import Store, fingerprint


_CONTEXT = multiprocessing.get_context("forkserver")


def grade_batch(paths: list[str | Path], out: Path, jobs: int = 1, seed: int | None = None,
                limits: Limits = Limits(), resume: bool = False, chapter: str | None = None,
                progress: bool = True, root: str | Path | None = None,
                points: PointsTable | None = None, overrides: Overrides | None = None) -> dict:
    """Grade every notebook under ``paths`` as ``chapter`` (None: each notebook suggests its own,
    and its result says so); students are read relative to ``root`` (``discover``); scores follow
    ``points`` and ``overrides`` (``points.py``), resumed results included."""
    out = Path(out)
    store = Store(out)
    seed = store.start(seed, chapter, resume, new_seed=lambda: secrets.randbelow(2**31))
    found = discover.scan(paths, root)
    todo, done = [], {}
    for sub in found.submissions:
        fingerprint_ = fingerprint(sub.path, seed, chapter, sub.root)
        saved = store.load(sub.key, fingerprint_) if resume else None
        if saved is not None:
            done[sub.key] = saved
        else:
            todo.append((sub, fingerprint_))
    for key, result in _run(todo, store, seed, limits, chapter, jobs, progress):
        done[key] = result
    graded = []
    for sub in found.submissions:
        if sub.key in done:  # who it is belongs to this run's layout, also for a resumed result
            done[sub.key].student, done[sub.key].identified_by = sub.student, sub.identified_by
            graded.append((sub, done[sub.key]))
    claims = claimed_twice(graded)
    batch = BatchResults(seed, [r for _, r in graded], [shown(r) for r in found.roots],
                         [asdict(s) for s in found.skipped], claims)
    batch.points_file, batch.overrides_file = (points or PointsTable()).source, (overrides or Overrides()).source
    batch.override_warnings = apply_points(batch.submissions, points, overrides)
    return write_all(batch, out)


def claimed_twice(graded: list[tuple[discover.Submission, SubmissionResult]]) -> list[dict]:
    """Students with more than one notebook of one chapter: each is reported, never merged into
    the other or overwritten by it, and each result says which other notebooks claim the student
    (by their paths below the class root: the learner reads these notes too)."""
    groups: dict[tuple[str, str], list[tuple[discover.Submission, SubmissionResult]]] = {}
    for sub, r in graded:
        groups.setdefault((r.student, r.chapter or "?"), []).append((sub, r))
    claims = []
    for (student, chapter), group in groups.items():
        if len(group) < 2:
            continue
        claims.append({"student": student, "chapter": chapter, "paths": [r.path for _, r in group]})
        for sub, r in group:
            others = [shown(o.key) for o, _ in group if o is not sub]
            note = (f"{len(others)} other notebook(s) also claim student {student!r} for chapter {chapter}: "
                    + "; ".join(others) + ". Each is graded and reported on its own; none replaces another.")
            if note not in r.notes:
                r.notes.append(note)
    return claims


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
                    result = SubmissionResult(shown(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
                                              error="the grader itself failed on this notebook")
                    store.save(sub.key, fingerprint_, result)
                    bar.update(1)
                    yield sub.key, result
    bar.close()


def _grade_one(sub: discover.Submission, store: Store, fingerprint_: str, seed: int, limits: Limits,
               chapter: str | None) -> SubmissionResult:
    try:
        result = grade_notebook(sub.path, sub.student, seed, limits, chapter, sub.root)
    except Exception as exc:  # a grader bug must cost one result, not the batch
        result = SubmissionResult(shown(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
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
