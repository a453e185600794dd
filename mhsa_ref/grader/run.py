"""Run a submission's extracted code in the sandbox, one fresh process per submission.

The parent side of ``sandbox/``: it writes the plan (code, cases as .npy), reads outcome frames
against a wall-clock deadline per exercise, kills the sandbox's whole process group when one
passes, and starts a fresh sandbox for the exercises after it, so that a hang or a crash costs
only the exercise it happened in.
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..exercises import Exercise
from ..judge import Outcome
from .sandbox import protocol

BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox", "boot.py")
RESULT_BYTES = 256 << 20  # all arrays a submission may send back, together


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # wall clock per exercise (and for loading the definitions)
    memory_mb: int = 1024  # address space the learner's code may add
    processes: int = 32
    file_mb: int = 64  # largest file the learner's code may write
    scratch_mb: int = 128  # size of the sandbox's private, writable tmpfs


@dataclass
class ExerciseRun:
    """What happened to one exercise: ``state`` is ran, missing, timeout, crashed or rejected."""

    state: str = "pending"
    outcomes: list[Outcome] = field(default_factory=list)
    forbidden_calls: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class RunReport:
    exercises: list[ExerciseRun]
    load_problems: list[str] = field(default_factory=list)
    isolation: str = "unknown"
    processes_started: int = 0
    seconds: float = 0.0
    start_seconds: float = 0.0  # until each sandbox said it was ready


def run_submission(code: str, filename: str, exercises: list[Exercise], cases: list[list],
                   limits: Limits = Limits()) -> RunReport:
    """Run ``code`` on every case of every exercise; never raises for anything the code does."""
    t0 = time.perf_counter()
    blobs: list[bytes] = []
    specs = [
        {"name": ex.name, "kind": "module" if ex.harness else "function", "n_outputs": len(ex.outputs),
         "forbidden": list(ex.forbidden), "cases": [protocol.encode(c.args, blobs) for c in ex_cases]}
        for ex, ex_cases in zip(exercises, cases)
    ]
    report = RunReport([ExerciseRun() for _ in exercises])
    start = 0
    while start < len(exercises):
        report.processes_started += 1
        start = _one_process(code, filename, specs, blobs, cases, start, limits, report)
    report.seconds = time.perf_counter() - t0
    return report


def _one_process(code, filename, specs, blobs, cases, start, limits, report) -> int:
    """Run exercises from ``start`` in one sandbox; return where the next sandbox should begin."""
    nonce = secrets.token_hex(16)
    root = tempfile.mkdtemp(prefix="mhsa-sandbox-")
    os.chmod(root, 0o755)
    read_fd, write_fd = os.pipe()
    n = len(specs)
    plan = {"nonce": nonce, "code": code, "filename": filename, "exercises": specs, "start": start,
            "fd": write_fd, "root": root, "uid": 100000 + secrets.randbelow(50000),
            "limits": {"memory_mb": limits.memory_mb, "processes": limits.processes,
                       "file_mb": limits.file_mb, "scratch_mb": limits.scratch_mb,
                       "cpu_s": int(limits.timeout_s * (n - start + 1)) + 5}}
    t_spawn = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", BOOT], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=None if os.environ.get("MHSA_GRADER_DEBUG") else subprocess.DEVNULL, pass_fds=(write_fd,), start_new_session=True, cwd=root,
        env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "PATH": "/usr/bin:/bin"},
    )
    os.close(write_fd)
    frames: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_read, args=(os.fdopen(read_fd, "rb"), nonce, frames), daemon=True)
    reader.start()
    try:
        protocol.write_frame(proc.stdin, {"plan": plan}, blobs)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    # ``done`` is the last exercise finished in this process; ``running`` the one under way.
    done, running, case_index = start - 1, None, 0
    deadline = time.monotonic() + limits.timeout_s + 5  # start-up and loading
    try:
        while True:
            try:
                frame = frames.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                if running is None:
                    _fail_from(report, done + 1, "timeout",
                               f"loading your definitions did not finish within {limits.timeout_s:g} s")
                    return n
                _fail_from(report, running, "timeout", f"did not finish within {limits.timeout_s:g} s",
                           only_one=True)
                return running + 1
            if frame[0] == "end":  # the process ended, or closed the channel, before finishing
                detail = _exit_detail(proc)
                if running is None:
                    _fail_from(report, done + 1, "crashed",
                               f"the process ended outside any exercise ({detail}), e.g. while loading")
                    return n
                _fail_from(report, running, "crashed", f"the process ended during this exercise ({detail})",
                           only_one=True)
                return running + 1
            if frame[0] == "bad":
                raise protocol.ProtocolError(frame[1])
            header, data = frame[1], frame[2]
            t = header.get("type")
            if t == "ready":
                report.isolation = str(header.get("isolation"))[:100]
                report.start_seconds += time.perf_counter() - t_spawn
            elif t == "fatal":
                _fail_from(report, start, "crashed", f"the sandbox could not start: {str(header.get('error'))[:300]}")
                return n
            elif t == "loaded":
                report.load_problems = [str(p)[:500] for p in header.get("problems", [])][:50]
            elif t == "start" and running is None and header.get("exercise") == done + 1 < n:
                running, case_index = done + 1, 0
                report.exercises[running].state = "running"
                deadline = time.monotonic() + limits.timeout_s
            elif t == "case" and running is not None and header.get("exercise") == running \
                    and header.get("case") == case_index < len(cases[running]):
                report.exercises[running].outcomes.append(_outcome(header, data, cases[running][case_index]))
                case_index += 1
            elif t == "done" and running is not None and header.get("exercise") == running:
                run = report.exercises[running]
                if header.get("missing"):
                    run.state = "missing"
                elif case_index != len(cases[running]):
                    raise protocol.ProtocolError("an exercise ended without all its cases")
                else:
                    run.state = "ran"
                run.forbidden_calls = [str(c)[:100] for c in header.get("forbidden_calls", [])][:20]
                done, running = running, None
                deadline = time.monotonic() + limits.timeout_s
            elif t == "finished" and running is None and done == n - 1:
                return n
            else:
                raise protocol.ProtocolError(f"an unexpected {str(t)[:20]!r} frame")
    except protocol.ProtocolError as exc:
        _fail_from(report, done + 1 if running is None else running, "rejected",
                   f"the grader received results it cannot trust ({exc}); has your code written to "
                   "the grader's channel?")
        return n
    finally:
        _kill(proc)
        shutil.rmtree(root, ignore_errors=True)


def _read(stream, nonce: str, frames: queue.Queue) -> None:
    budget = [RESULT_BYTES]
    try:
        while True:
            frame = protocol.read_frame(stream, nonce, budget)
            if frame is None:
                frames.put(("end",))
                return
            frames.put(("frame", *frame))
    except (protocol.ProtocolError, OSError, ValueError) as exc:
        frames.put(("bad", str(exc)[:200]))
    finally:
        stream.close()


def _outcome(header: dict, data: list[bytes], case) -> Outcome:
    kind = header.get("kind")
    if kind == "not_implemented":
        return Outcome(not_implemented=True)
    if kind == "out_of_memory":
        return Outcome(error="MemoryError: " + str(header.get("error", "out of memory"))[:500], out_of_memory=True)
    if kind == "raised":
        return Outcome(error=str(header.get("error"))[:2000])
    if kind != "returned":
        raise protocol.ProtocolError(f"an outcome of unknown kind {str(kind)[:20]!r}")
    outputs = protocol.decode(header.get("outputs"), data)
    after = protocol.decode(header.get("args_after"), data)
    if not isinstance(outputs, tuple) or not isinstance(after, tuple) or len(after) != len(case.args):
        raise protocol.ProtocolError("an outcome of the wrong form")
    names = case.arg_names or tuple(f"argument {i + 1}" for i in range(len(case.args)))
    modified = tuple(
        name for name, before, now in zip(names, case.args, after)
        if isinstance(before, np.ndarray) and not (
            isinstance(now, np.ndarray) and now.shape == before.shape and now.dtype == before.dtype
            and np.array_equal(now, before, equal_nan=before.dtype.kind in "fc"))
    )
    return Outcome(outputs=outputs, modified=modified)


def _fail_from(report: RunReport, index: int, state: str, message: str, only_one: bool = False) -> None:
    """Mark exercise ``index`` (and, unless ``only_one``, every later one not yet run) as failed."""
    for i in range(index, len(report.exercises)):
        if report.exercises[i].state in ("pending", "running"):
            report.exercises[i] = ExerciseRun(state, message=message)
        if only_one:
            break


def _exit_detail(proc: subprocess.Popen) -> str:
    try:
        code = proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        return "it closed the grader's channel"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit status {code}"


def _kill(proc: subprocess.Popen) -> None:
    """Kill the sandbox's process group (in a PID namespace that takes every descendant with it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
