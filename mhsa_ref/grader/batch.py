"""Batches: grade many notebooks in parallel, survive anything, resume after being killed.

Each submission's result is written atomically to ``<out>/results/<key>.json`` the moment it is
known; the reports are then rebuilt from those files. A killed batch (even ``kill -9``) therefore
loses at most the submissions that were in flight, and ``--resume`` grades exactly those: a result
counts as done only for the same file contents, seed and chapter override.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import secrets
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path

from . import discover
from .grade import ExerciseResult, SubmissionResult, grade_notebook
from .report import write_all, write_atomically
from .run import Limits


_CONTEXT = multiprocessing.get_context("forkserver")


def grade_batch(paths: list[str | Path], out: Path, jobs: int = 1, seed: int | None = None,
                limits: Limits = Limits(), resume: bool = False, chapter: str | None = None,
                progress: bool = True) -> dict:
    out = Path(out)
    # Grades are private, and where the sandbox cannot hide the host's files (no namespaces)
    # its unprivileged user must not read other students' results either.
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    results_dir = out / "results"
    state_file = out / "run.json"
    if resume and state_file.exists():
        state = json.loads(state_file.read_text())
        if seed is not None and seed != state["seed"]:
            raise ValueError(f"--resume: this batch was graded with seed {state['seed']}, not {seed}")
        seed = state["seed"]
    else:
        if results_dir.exists():  # a fresh batch never mixes with an old one's results
            for old in results_dir.glob("*.json"):
                old.unlink()
        seed = secrets.randbelow(2**31) if seed is None else seed
        write_atomically(state_file, json.dumps({"seed": seed, "chapter": chapter}))
    submissions = discover.find(paths)
    todo, done = [], {}
    for sub in submissions:
        fingerprint = _fingerprint(sub.path, seed, chapter)
        file = results_dir / f"{hashlib.sha256(sub.key.encode()).hexdigest()[:24]}.json"
        if resume and file.exists():
            saved = json.loads(file.read_text())
            if saved.get("fingerprint") == fingerprint:
                done[sub.key] = _load(saved["result"])
                continue
        todo.append((sub, file, fingerprint))
    for key, result in _run(todo, seed, limits, chapter, jobs, progress):
        done[key] = result
    results = [done[s.key] for s in submissions if s.key in done]
    return write_all(results, seed, out)


def _run(todo, seed, limits, chapter, jobs, progress):
    bar = _progress(len(todo), progress)
    attempts: dict[str, int] = {}
    while todo:
        pending = {}
        try:
            # Not fork: a process that has run PyTorch holds an OpenMP thread team, and a forked
            # copy of it hangs in its first matrix product. Forkserver workers start clean.
            with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=_CONTEXT) as pool:
                for item in todo:
                    sub, file, fingerprint = item
                    pending[pool.submit(_grade_one, sub, file, fingerprint, seed, limits, chapter)] = item
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
                sub, file, fingerprint = item
                attempts[sub.key] = attempts.get(sub.key, 0) + 1
                if attempts[sub.key] < 2:
                    todo.append(item)
                else:
                    result = SubmissionResult(str(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
                                              error="the grader itself failed on this notebook")
                    _save(file, fingerprint, result)
                    bar.update(1)
                    yield sub.key, result
    bar.close()


def _grade_one(sub: discover.Submission, file: Path, fingerprint: str, seed: int, limits: Limits,
               chapter: str | None) -> SubmissionResult:
    try:
        result = grade_notebook(sub.path, sub.student, seed, limits, chapter)
    except Exception as exc:  # a grader bug must cost one result, not the batch
        result = SubmissionResult(str(sub.path), sub.student, None, 0.0, 0.0, seed=seed,
                                  error=f"the grader failed on this notebook: {type(exc).__name__}: {exc}")
    _save(file, fingerprint, result)
    return result


def _save(file: Path, fingerprint: str, result: SubmissionResult) -> None:
    write_atomically(file, json.dumps({"fingerprint": fingerprint, "result": asdict(result)}))


def _load(d: dict) -> SubmissionResult:
    exercises = [ExerciseResult(**e) for e in d.pop("exercises")]
    return SubmissionResult(**d, exercises=exercises)


def _fingerprint(path: Path, seed: int, chapter: str | None) -> str:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return f"{digest}:{seed}:{chapter}"


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
