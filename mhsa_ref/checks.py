"""What a learner calls in a notebook: the ``@exercise`` decorator and ``check(fn)``.

``check`` runs the learner's function here, in the notebook's own process (the learner is
only grading themselves), and hands the outcomes to the same judge the autograder uses.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Any, Callable

from . import exercises
from .judge import Verdict, call, judge
from .spec import Exercise
from .untrusted.outcome import ERROR, FAILED, NOT_IMPLEMENTED, OUT_OF_MEMORY, PASSED, WORDS

# The seed of the public cases that `check` runs; the autograder draws its own.
PUBLIC_SEED = 0

_MARK = "__mhsa_exercise__"
_LEARNER = "__mhsa_learner__"  # the learner's own function, behind the fallback


def exercise(fn: Callable | None = None, *, id: str | None = None) -> Any:
    """Register a learner's function as the exercise of the same name.

    While its body still raises ``NotImplementedError``, calls fall back to the reference
    implementation (with a one-line note), so the rest of the chapter keeps working.
    ``check`` and the autograder always look at the learner's own code, never the fallback.
    """
    if fn is None:
        return lambda f: exercise(f, id=id)
    ex = exercises.get(id) if id else exercises.find_by_name(fn.__name__)
    # Decorating twice (a re-run cell) must still grade the learner's body, not a fallback.
    fn = getattr(fn, _LEARNER, fn)
    noted = False

    def note() -> None:
        nonlocal noted
        if not noted:
            noted = True
            print(textwrap.fill(
                f"note: {ex.name} is not implemented yet ({ex.id}); the reference solution "
                "stands in for it so the chapter keeps running.", 76, subsequent_indent="      "))

    if isinstance(fn, type):
        wrapper = _class_with_fallback(fn, ex, note)
    else:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except NotImplementedError:
                note()
                return ex.reference(*args, **kwargs)

    setattr(wrapper, _MARK, ex.id)
    setattr(wrapper, _LEARNER, fn)
    return wrapper


def _class_with_fallback(cls: type, ex: Exercise, note: Callable[[], None]) -> type:
    """A subclass of the learner's module class that falls back to the reference.

    If the learner's ``__init__`` is unfinished, constructing the class gives a reference module.
    If only ``forward`` is, the reference's forward runs on the learner's own parameters
    (``torch.func.functional_call``), so training still updates the learner's module.
    """
    import torch

    class Fallback(type(cls)):
        def __call__(klass, *args: Any, **kwargs: Any) -> Any:
            try:
                module = super().__call__(*args, **kwargs)
            except NotImplementedError:
                note()
                return ex.reference(*args, **kwargs)
            module.__dict__["_mhsa_init"] = (args, kwargs)
            return module

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return cls.forward(self, *args, **kwargs)
        except NotImplementedError:
            note()
            reference = self.__dict__.get("_mhsa_reference")
            if reference is None:  # built once: only its code is used, with this module's weights
                init_args, init_kwargs = self.__dict__["_mhsa_init"]
                reference = self.__dict__["_mhsa_reference"] = ex.reference(*init_args, **init_kwargs)
            reference.train(self.training)
            state = {**dict(self.named_parameters()), **dict(self.named_buffers())}
            return torch.func.functional_call(reference, state, args, kwargs)

    return Fallback(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__,
                                            "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})


def _resolve(fn: Callable, exercise_id: str | None) -> tuple[Callable, Exercise]:
    ex_id = exercise_id or getattr(fn, _MARK, None)
    ex = exercises.get(ex_id) if ex_id else exercises.find_by_name(getattr(fn, "__name__", ""))
    # Also right for a wrapper of a wrapper: functools.wraps copies this attribute along.
    own = getattr(fn, _LEARNER, fn)
    return own, ex


def evaluate(fn: Callable, exercise_id: str | None = None, seed: int = PUBLIC_SEED) -> Verdict:
    """Run ``fn`` on the exercise's cases and return the judge's verdict (no printing)."""
    own, ex = _resolve(fn, exercise_id)
    cases = ex.cases(seed)
    outcomes = []
    for case in cases:
        outcomes.append(call(own, case, len(ex.outputs), ex.harness))
        if outcomes[-1].ending == NOT_IMPLEMENTED:
            break  # no point running the rest: the verdict is "not implemented yet"
    return judge(ex, cases[: len(outcomes)], outcomes, seed=seed)


def check(fn: Callable, exercise_id: str | None = None) -> None:
    """Check a learner's function on the public cases and print one clear verdict."""
    verdict = evaluate(fn, exercise_id)
    print(format_verdict(verdict))


_ICONS = {PASSED: "✅", FAILED: "❌", ERROR: "❌", NOT_IMPLEMENTED: "⏳", OUT_OF_MEMORY: "❌"}


def format_verdict(v: Verdict) -> str:
    """The verdict as a learner reads it: one headline, then what went wrong and why."""
    head = WORDS[v.status] + (f" ({v.n_cases} cases)" if v.passed else "")
    lines = [f"{_ICONS[v.status]} {v.exercise}: {head}"]
    if v.status != PASSED:
        for line in v.feedback.splitlines():
            if line.startswith(" "):  # an array printout: keep its layout
                lines.append("   " + line)
            else:  # prose: wrap to fit a notebook's output area
                lines += textwrap.wrap(line, 76, initial_indent="   ", subsequent_indent="   ")
        others = len(v.details) - 1
        if others > 0:
            lines.append(f"   ({others} more case{'s' if others > 1 else ''} also went wrong.)")
    return "\n".join(lines)
