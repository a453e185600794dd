"""What every diagnosis shares: the ``Diagnosis`` it returns, plain arrays and their comparison, the
context of one judged call (``_Ctx``: the cases, both sides' outcomes, the tolerances), and the
defaults the reference's signature states (read by the argument changes and the case partition).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..spec import Case, Exercise
from ..untrusted.outcome import Outcome


@dataclass(frozen=True)
class Diagnosis:
    """A named mistake: ``id`` (``kind`` or ``kind:detail``) and a sentence for the learner."""

    id: str
    message: str


# ---------------------------------------------------------------------------------------------
# Arrays and comparisons


def _arr(value: object) -> np.ndarray | None:
    """A plain numeric ndarray, or None (object arrays and subclasses are never trusted)."""
    if not isinstance(value, (np.ndarray, np.generic)):
        return None
    a = np.asarray(value)
    return a if a.dtype.kind in "biufc" else None


def _f(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype.kind in "biu" else a


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    """Same shape and values (NaN equals NaN)."""
    if a.shape != b.shape:
        return False
    with np.errstate(all="ignore"):
        return bool(np.isclose(_f(a), _f(b), rtol=rtol, atol=atol, equal_nan=True).all())


@dataclass
class _Ctx:
    ex: Exercise
    cases: list[Case]
    outcomes: list[Outcome]
    reference: list[Outcome]
    rtol: float
    atol: float

    def names(self, case: Case) -> tuple[str, ...]:
        return case.output_names or self.ex.outputs

    def label(self, case: Case, k: int) -> str:
        return f"`{self.names(case)[k]}`" if len(self.names(case)) > 1 else "your output"

    def suffix(self, case: Case, k: int) -> str:
        return f":{self.names(case)[k]}" if len(self.names(case)) > 1 else ""

    def same(self, got: Outcome, want: Outcome) -> bool:
        """Do two returned outcomes hold the same arrays (same dtype kind, shape and values)?"""
        if not (got.returned and want.returned) or len(got.outputs) != len(want.outputs):
            return False
        for x, y in zip(got.outputs, want.outputs):
            a, b = _arr(x), _arr(y)
            if a is None or b is None or (a.dtype == np.bool_) != (b.dtype == np.bool_):
                return False
            if not _close(a, b, self.rtol, self.atol):
                return False
        return True

    def failing(self) -> list[int]:
        """The cases the judge fails, at the exercise's own tolerance."""
        exact = replace(self, rtol=self.ex.rtol, atol=self.ex.atol)
        return [i for i, (got, ref) in enumerate(zip(self.outcomes, self.reference))
                if not exact.same(got, ref) or _dtypes_differ(got, ref)]


def _dtypes_differ(got: Outcome, ref: Outcome) -> bool:
    return got.returned and any(_arr(x) is not None and _arr(y) is not None and _arr(x).dtype != _arr(y).dtype
               for x, y in zip(got.outputs, ref.outputs))


# ---------------------------------------------------------------------------------------------
# Defaults the reference's signature states


def _signature_defaults(ex: Exercise) -> dict[str, Any]:
    fn = getattr(ex.reference, "resolve", lambda: ex.reference)()
    if isinstance(fn, type):  # a module: the defaults of forward, then of __init__
        fn = fn.forward
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}


def _forward_defaults(ex: Exercise) -> dict[str, Any]:
    """For a module exercise, the defaults of ``forward(...)`` as the signature states them."""
    m = re.search(r"forward\(([^)]*)\)", ex.signature)
    out: dict[str, Any] = {}
    if m:
        for i, part in enumerate(p.strip() for p in m.group(1).split(",")):
            name, eq, default = part.partition("=")
            out[name.strip()] = (i, default.strip() if eq else None)
    return out


def _equal(v: Any, d: Any) -> bool:
    if v is None or d is None:
        return v is d
    if isinstance(v, np.ndarray) or isinstance(d, np.ndarray):
        return False
    try:
        return bool(v == d)
    except Exception:
        return False


def _at_defaults(ex: Exercise, case: Case) -> bool:
    """Does ``case`` leave every optional argument at its default (no mask, ...)? For a module,
    whether its forward gets only the arguments without a default."""
    if ex.harness is not None:
        required = sum(1 for _, (_, default) in _forward_defaults(ex).items() if default is None)
        inputs = case.args[2] if len(case.args) > 2 and isinstance(case.args[2], tuple) else ()
        return len(inputs) <= required
    defaults = _signature_defaults(ex)
    names = case.arg_names
    return all(_equal(case.args[names.index(n)], d) for n, d in defaults.items() if n in names)


def _optional_arguments(ex: Exercise) -> list[str]:
    """The names of the arguments that have a default (a module's: those of its forward)."""
    if ex.harness is not None:
        return [n for n, (_, default) in _forward_defaults(ex).items() if default is not None]
    return list(_signature_defaults(ex))
