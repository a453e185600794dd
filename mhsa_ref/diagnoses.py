"""Generic diagnoses: name a mistake from how the learner's outputs relate to the right ones.

A listed misconception (``spec.Misconception``) names a mistake when the learner's outcomes
agree with one of its wrong implementations. The diagnoses here need no wrong implementation:
they look at the learner's outputs beside the reference's, on the same cases, and recognise a
relation that holds whatever code produced it:

- the outputs equal what the *reference* gives with one argument changed (left at its
  default, inverted, replaced by another argument, by zeros, ones, the identity or its
  transpose): that argument is ignored or confused ("ignores `mask`");
- a module's parameter gets no gradient (never used), or the output is right and a gradient
  is not (something is detached);
- one output is a transformation of the right one: the outputs in another order, another dtype,
  NaN exactly where the answer is 0, True and False swapped, axes permuted or a reshape where a
  transpose was needed, an axis averaged away, slices along an axis misplaced, the sign flipped,
  a constant factor, an argument added;
- the right one is a distribution along an axis and the learner's is its log, the scores before
  the softmax, unnormalized, normalized along another axis, or the softmax of rescaled scores;
- errors only on a matrix's diagonal or only off it, or only in the last digits;
- right exactly when an argument is at its default and wrong when it is not.

Which diagnoses apply is decided from the exercise's spec (its reference, the cases' argument
names, the reference signature's defaults, the outputs' names), never from the exercise's id.
Everything here is trusted code that runs in the judge's process: it calls only the reference
(on changed copies of the cases) and looks at the learner's outputs as plain arrays.
"""

from __future__ import annotations

import inspect
import itertools
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import numpy as np

from .spec import Case, Exercise
from .untrusted.outcome import Outcome


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
# The entry point


def generic(ex: Exercise, cases: list[Case], outcomes: list[Outcome], reference: list[Outcome]) -> Diagnosis | None:
    """The first generic diagnosis that explains every case the learner got wrong, or None.

    Relations between outputs need every call to have returned (an exception is not an output);
    only the partition of the cases (right exactly where ...) also reads calls that raised.
    """
    if not all(r.returned for r in reference):
        return None
    ctx = _Ctx(ex, cases, outcomes, reference, rtol=ex.rtol * 10, atol=ex.atol * 10)
    if not ctx.failing():
        return None
    returned = all(o.returned for o in outcomes)
    for detector in DETECTORS:
        if not returned and detector is not _wrong_only_with:
            continue
        try:
            with np.errstate(all="ignore"):
                found = detector(ctx)
        except Exception:  # trusted maths on untrusted arrays: a detector that cannot apply says nothing
            found = None
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------------------------------------
# 1. Outputs in another order


def _outputs_swapped(ctx: _Ctx) -> Diagnosis | None:
    n = len(ctx.reference[0].outputs)
    if n < 2 or ctx.cases[0].output_names:
        return None
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)):
            continue
        if all(ctx.same(Outcome("returned", tuple(got.outputs[p] for p in perm)), ref)
               for got, ref in zip(ctx.outcomes, ctx.reference)):
            names = ctx.ex.outputs
            yours = ", ".join(names[p] for p in perm)
            return Diagnosis("outputs-swapped",
                             f"You return ({yours}); the order is ({', '.join(names)}). Each value is right, "
                             "in the wrong place: return them in the order the signature gives.")
    return None


# ---------------------------------------------------------------------------------------------
# 2. An argument ignored or confused: the reference with one argument changed


@dataclass(frozen=True)
class _Change:
    """A change of the case's arguments: ``apply(case)`` gives the changed arguments or None
    where the change does not apply to that case."""

    kind: str  # ignored, inverted, confused, swapped, constant
    arg: str
    what: str  # the value in words: "its default (None)", "~mask", "`K`"
    apply: Callable[[Case], tuple | None]
    # Compare only the first this many outputs (a module's output and input gradient, where a
    # rescaled parameter changes that parameter's own gradient); None: all of them.
    compare: int | None = None


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


def _with(case: Case, i: int, value: Any) -> tuple:
    args = list(case.fresh_args())
    args[i] = value
    return tuple(args)


def _plain_changes(ctx: _Ctx) -> Iterator[_Change]:
    """Changes of a function's arguments, decided from the cases' argument names and values and
    the reference's defaults: the most plausible mistakes first."""
    case0 = ctx.cases[0]
    names = case0.arg_names or tuple(f"argument {i + 1}" for i in range(len(case0.args)))
    defaults = _signature_defaults(ctx.ex)

    def at(i, fn):
        return lambda c: None if i >= len(c.args) else fn(c, c.args[i])

    for i, n in enumerate(names):
        if n in defaults:
            d = defaults[n]
            yield _Change("ignored", n, f"its default ({d!r})",
                          at(i, lambda c, v, i=i, d=d: None if _equal(v, d) else _with(c, i, d)))
    for i, n in enumerate(names):
        yield _Change("inverted", n, f"~{n}",
                      at(i, lambda c, v, i=i: _with(c, i, ~v) if _is_bool_array(v) else None))
        yield _Change("ignored", n, "the opposite value",
                      at(i, lambda c, v, i=i: _with(c, i, not v) if isinstance(v, (bool, np.bool_)) else None))
    for (i, n), (j, m) in itertools.permutations(enumerate(names), 2):
        yield _Change("confused", n, f"`{m}`",
                      at(i, lambda c, v, i=i, j=j: _with(c, i, c.args[j]) if _float_array(v) and _float_array(c.args[j]) else None))
    for (i, n), (j, m) in itertools.combinations(enumerate(names), 2):
        def swap(c, v, i=i, j=j):
            if not (_float_array(v) and _float_array(c.args[j])):
                return None
            args = list(c.fresh_args())
            args[i], args[j] = args[j], args[i]
            return tuple(args)
        yield _Change("swapped", f"{n},{m}", "", at(i, swap))
    for i, n in enumerate(names):
        yield _Change("transposed", n, f"`{n}.T`",
                      at(i, lambda c, v, i=i: _with(c, i, v.T.copy()) if _square(v) else None))
        yield _Change("constant", n, "the identity matrix",
                      at(i, lambda c, v, i=i: _with(c, i, np.eye(v.shape[0])) if _square(v) else None))
        yield _Change("constant", n, "all zeros",
                      at(i, lambda c, v, i=i: _with(c, i, np.zeros_like(v)) if _float_array(v) else None))
        yield _Change("constant", n, "all ones",
                      at(i, lambda c, v, i=i: _with(c, i, np.ones_like(v)) if _float_array(v) else None))
        yield _Change("constant", n, "0",
                      at(i, lambda c, v, i=i: _with(c, i, 0.0) if isinstance(v, float) and v != 0 else None))


def _module_changes(ctx: _Ctx) -> Iterator[_Change]:
    """Changes of a module exercise's call: a forward argument left out (its default) or
    inverted, a boolean constructor argument flipped."""
    fwd = _forward_defaults(ctx.ex)
    for name, (pos, default) in fwd.items():
        if pos == 0 or default is None:
            continue

        def drop(c, pos=pos):
            init, state, inputs, grad = c.fresh_args()
            return None if len(inputs) <= pos else (init, state, tuple(inputs[:pos]), grad)

        def invert(c, pos=pos):
            init, state, inputs, grad = c.fresh_args()
            if len(inputs) <= pos or not _is_bool_array(inputs[pos]):
                return None
            inputs = list(inputs)
            inputs[pos] = ~inputs[pos]
            return (init, state, tuple(inputs), grad)

        yield _Change("ignored", name, f"its default ({default})", drop)
        yield _Change("inverted", name, f"~{name}", invert)
    keys = sorted({k for c in ctx.cases for k, v in c.args[0].items() if isinstance(v, bool)})
    for key in keys:
        def flip(c, key=key):
            init, state, inputs, grad = c.fresh_args()
            if not isinstance(init.get(key), bool):
                return None
            return ({**init, key: not init[key]}, state, inputs, grad)
        yield _Change("ignored", key, "the opposite value", flip)
    yield from _rescaled_submodules(ctx)


# Rescaling a submodule costs one run of the reference module per candidate: at most this many
# candidates are tried, the likeliest factors first, so a wrong module costs at most 16 more runs of the reference.
RESCALE_BUDGET = 16


def _factor_expressions(init: dict) -> list[tuple[str, Callable[[dict], float | None]]]:
    """Factors a module's arithmetic may get wrong, likeliest first, as expressions of its
    constructor's integer arguments (read off ``init``, one case's): 2 and 1/2 (a term counted
    twice or halved), then the square root and its inverse of the ratio of two of them (a scale
    such as sqrt(d_model / num_heads)), then of each one. Each comes with how to evaluate it on any case's arguments."""
    ints = [k for k, v in init.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 1]

    def value(num: str, den: str | None) -> Callable[[dict], float | None]:
        def of(kw: dict) -> float | None:
            a, b = kw.get(num), (kw.get(den) if den else 1)
            ok = all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in (a, b))
            return a / b if ok else None
        return of

    bases = [(f"{a} / {b}", value(a, b)) for a, b in itertools.permutations(ints, 2) if init[a] > init[b]]
    bases += [(k, value(k, None)) for k in ints if init[k] > 1]

    def sqrt(f, inverse=False):
        return lambda kw: None if f(kw) is None else (f(kw) ** -0.5 if inverse else f(kw) ** 0.5)

    out: list[tuple[str, Callable[[dict], float | None]]] = [("2", lambda kw: 2.0), ("1/2", lambda kw: 0.5)]
    for n, f in bases:
        out += [(f"sqrt({n})", sqrt(f)), (f"1/sqrt({n})", sqrt(f, inverse=True))]
    return out


def _rescaled_submodules(ctx: _Ctx) -> Iterator[_Change]:
    """A module whose output equals the reference's with one submodule's parameters multiplied
    by a factor: that factor is missing or extra on the path through that submodule."""
    groups = sorted({k.rsplit(".", 1)[0] for c in ctx.cases for k in c.args[1] if "." in k})
    seen: set[tuple] = set()
    exprs = []
    for name, of in _factor_expressions(ctx.cases[0].args[0]):  # one candidate per distinct effect
        values = tuple(None if (v := of(c.args[0])) is None else round(v, 9) for c in ctx.cases)
        if values not in seen:
            seen.add(values)
            exprs.append((name, of))
    candidates = [(g, e) for e in exprs for g in groups][:RESCALE_BUDGET]
    for group, (expr, of) in candidates:
        def scaled(c, group=group, of=of):
            init, state, inputs, grad = c.fresh_args()
            factor = of(init)
            if factor is None:
                return None
            state = {k: (np.asarray(v) * np.float32(factor)).astype(np.asarray(v).dtype)
                     if k.rsplit(".", 1)[0] == group else v for k, v in state.items()}
            return (init, state, inputs, grad)
        yield _Change("rescaled", group, expr, scaled, compare=1)


def _equal(v: Any, d: Any) -> bool:
    if v is None or d is None:
        return v is d
    if isinstance(v, np.ndarray) or isinstance(d, np.ndarray):
        return False
    try:
        return bool(v == d)
    except Exception:
        return False


def _is_bool_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype == np.bool_


def _float_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def _square(v: Any) -> bool:
    return _float_array(v) and v.ndim == 2 and v.shape[0] == v.shape[1] and v.shape[0] > 1


def _changed_argument(ctx: _Ctx) -> Diagnosis | None:
    from .judge import call  # the judge imports this module

    changes = _module_changes(ctx) if ctx.ex.harness is not None else _plain_changes(ctx)
    n_out = len(ctx.ex.outputs)
    bad = ctx.failing()
    order = bad + [i for i in range(len(ctx.cases)) if i not in bad]  # refute early
    for change in changes:
        explained, values = 0, []
        for i in order:
            case, got = ctx.cases[i], ctx.outcomes[i]
            right = i not in bad
            args = change.apply(case)
            if args is None:
                if right:
                    continue
                break
            changed = call(ctx.ex.reference, replace(case, args=args), n_out, ctx.ex.harness)
            if change.compare is not None and changed.returned and got.returned:
                changed = replace(changed, outputs=changed.outputs[:change.compare])
                got = replace(got, outputs=got.outputs[:change.compare])
            if changed.returned and ctx.same(got, changed):
                if not right:
                    explained += 1
                    values.append(_value_of(case, change.arg))
                continue
            if not right:
                break
        else:
            if explained:
                return _changed_diagnosis(change, values)
    return None


def _value_of(case: Case, name: str) -> Any:
    if case.arg_names and name in case.arg_names:
        return case.args[case.arg_names.index(name)]
    if case.output_names and isinstance(case.args[0], dict):
        return case.args[0].get(name)
    return None


def _changed_diagnosis(change: _Change, values: list) -> Diagnosis:
    n = change.arg
    if change.kind == "ignored" and change.what == "the opposite value":
        if len({bool(v) for v in values if v is not None}) == 1:
            always = not bool(values[0])
            return Diagnosis(f"ignores-argument:{n}",
                             f"Your function behaves as if `{n}` were always {always}: it gives the right "
                             f"answer when {n}={always} and the same answer when {n}={not always}. Use `{n}` "
                             "to choose what to compute.")
        return Diagnosis(f"argument-inverted:{n}",
                         f"Your function does the opposite of what `{n}` asks: with {n}=True it computes "
                         f"what {n}=False asks for, and the other way round. Check the condition on `{n}`.")
    if change.kind == "ignored":
        return Diagnosis(f"ignores-argument:{n}",
                         f"Your output is what the right function gives when `{n}` is left at "
                         f"{change.what}: your code does not use the `{n}` it is given. Make the result "
                         f"depend on `{n}`.")
    if change.kind == "inverted":
        return Diagnosis(f"argument-inverted:{n}",
                         f"Your output is the right one for the opposite `{n}` (`{change.what}`): you read its "
                         "True and False the other way round. In this book a boolean mask's True means 'may "
                         "attend' (as in torch's scaled_dot_product_attention): keep what it marks True, "
                         "block what it marks False.")
    if change.kind == "confused":
        return Diagnosis(f"argument-confused:{n}",
                         f"Your output is what the right function gives with {change.what} in place of "
                         f"`{n}`: you use {change.what} where `{n}` belongs.")
    if change.kind == "swapped":
        a, b = n.split(",")
        return Diagnosis(f"arguments-swapped:{a},{b}",
                         f"Your output is what the right function gives with `{a}` and `{b}` swapped: "
                         f"each is used where the other belongs.")
    if change.kind == "rescaled":
        return Diagnosis(f"factor-off:{n}",
                         f"Your module computes what the right one computes with the parameters of `{n}` "
                         f"multiplied by {change.what}: a factor of {change.what} is missing (or extra) on "
                         f"the path through `{n}` (a scale such as 1/sqrt(d_k) of the scores, or a sublayer "
                         "added twice). Check each constant factor there.")
    if change.kind == "transposed":
        return Diagnosis(f"argument-transposed:{n}",
                         f"Your output is what the right function gives with {change.what} in place of "
                         f"`{n}`: you use `{n}` transposed. Check the layout the signature gives for `{n}`.")
    return Diagnosis(f"ignores-argument:{n}",
                     f"Your output is what the right function gives when `{n}` is {change.what}: "
                     f"your code does not use `{n}` (or uses something else in its place).")


# ---------------------------------------------------------------------------------------------
# 3. Modules: a parameter without gradient, a gradient wrong behind a right output


def _unused_parameters(ctx: _Ctx) -> Diagnosis | None:
    if not ctx.cases[0].output_names:
        return None
    unused: list[str] = []
    for case, got, ref in zip(ctx.cases, ctx.outcomes, ctx.reference):
        for k, name in enumerate(case.output_names):
            if k < 2 or not name.endswith(".grad") or k >= len(got.outputs):
                continue
            a, r = _arr(got.outputs[k]), _arr(ref.outputs[k])
            if a is None or r is None or not np.any(r != 0):
                continue
            if a.size == 0 or not np.any(a != 0):
                param = name.removesuffix(".grad")
                if param not in unused:
                    unused.append(param)
    if not unused:
        return None
    shown = ", ".join(f"`{p}`" for p in unused[:4]) + (", ..." if len(unused) > 4 else "")
    modules = sorted({p.rsplit(".", 1)[0] for p in unused})
    return Diagnosis(f"parameter-unused:{','.join(unused[:4])}",
                     f"{shown} get{'s' if len(unused) == 1 else ''} no gradient: your forward never uses "
                     f"{'it' if len(unused) == 1 else 'them'} (or cuts {'it' if len(unused) == 1 else 'them'} off "
                     f"with .detach(), .data or torch.no_grad()). Check where "
                     f"{', '.join('self.' + m for m in modules)} should enter the computation.")


def _gradient_behind_right_output(ctx: _Ctx) -> Diagnosis | None:
    if not ctx.cases[0].output_names:
        return None
    wrong: list[str] = []
    for case, got, ref in zip(ctx.cases, ctx.outcomes, ctx.reference):
        a, r = _arr(got.outputs[0]), _arr(ref.outputs[0])
        if a is None or r is None or not _close(a, r, ctx.rtol, ctx.atol):
            return None
        for k in range(1, len(ref.outputs)):
            x, y = _arr(got.outputs[k]), _arr(ref.outputs[k])
            if x is None or y is None or not _close(x, y, ctx.rtol, ctx.atol):
                name = case.output_names[k].removesuffix(".grad")
                if name not in wrong:
                    wrong.append(name)
    if not wrong:
        return None
    return Diagnosis(f"gradient-wrong:{wrong[0]}",
                     f"Your output is right on every case, but the gradient of {', '.join(f'`{w}`' for w in wrong[:4])} "
                     "is not: part of your forward is cut off from autograd (.detach(), .data, "
                     "torch.no_grad(), a NumPy round trip) or changed in place. Compute everything with "
                     "differentiable tensor operations on the inputs themselves.")


# ---------------------------------------------------------------------------------------------
# 4. One output a transformation of the right one


# A relation returns None (it does not hold), a message, or (its own kind, a message) when it
# names a more precise mistake than its row of RELATIONS.
Relation = Callable[["_Pair"], "str | tuple[str, str] | None"]


@dataclass
class _Pair:
    """One output on one failing case: the learner's ``a`` and the reference's ``r``."""

    ctx: _Ctx
    case: Case
    a: np.ndarray
    r: np.ndarray
    label: str
    factor: float | None = None  # a relation that fits a factor leaves it here, for _factor_words

    def close(self, x: np.ndarray, y: np.ndarray | None = None, loose: float = 1.0) -> bool:
        return _close(x, self.r if y is None else y, self.ctx.rtol * loose, self.ctx.atol * loose)


def _per_output(ctx: _Ctx) -> Diagnosis | None:
    """The first relation (in ``RELATIONS``' order) that holds on every case where one output
    is wrong, tried output by output."""
    # A module's gradients follow from its output: a relation found only in one of them, with the
    # output itself wrong, would name a symptom. Relate the output alone.
    n = 1 if ctx.cases[0].output_names else len(ctx.reference[0].outputs)
    for k in range(n):
        pairs = []
        for case, got, ref in zip(ctx.cases, ctx.outcomes, ctx.reference):
            if k >= len(got.outputs) or k >= len(ref.outputs):
                return None
            a, r = _arr(got.outputs[k]), _arr(ref.outputs[k])
            if a is None or r is None:
                pairs = []
                break
            if a.dtype != r.dtype or not _close(a, r, ctx.ex.rtol, ctx.ex.atol):
                pairs.append(_Pair(ctx, case, a, r, ctx.label(case, k)))
        if not pairs:
            continue
        for kind, relation in RELATIONS:
            messages = []
            for pair in pairs:
                try:
                    msg = relation(pair)
                except Exception:
                    msg = None
                if msg is None:
                    break
                messages.append(msg)
            else:
                first, msg = pairs[0], messages[0]
                if isinstance(msg, tuple):
                    kind, msg = msg
                return Diagnosis(kind + ctx.suffix(first.case, k), msg.replace(FACTOR, _factor_words(pairs)))
    return None


def _rel_dtype(p: _Pair) -> str | None:
    if p.a.dtype == p.r.dtype or p.a.shape != p.r.shape or not p.close(p.a.astype(p.r.dtype)):
        return None
    return (f"{_cap(p.label)} has the right values but dtype {p.a.dtype}; expected {p.r.dtype}. "
            f"Build it as {p.r.dtype} from the start (or convert with `.astype({p.r.dtype.name})`).")


def _rel_nonfinite_where_zero(p: _Pair) -> str | None:
    if p.a.shape != p.r.shape:
        return None
    bad = ~np.isfinite(_f(p.a))
    if not bad.any() or np.any(p.r[bad] != 0):
        return None
    if not p.close(np.where(bad, 0, p.a)):
        return None
    return (f"{_cap(p.label)} is NaN (or inf) exactly where the answer is 0: a row with nothing to "
            "average over (a query whose keys are all masked) comes out as 0/0. Such rows must be all "
            "zeros: replace them, e.g. with np.where(any_allowed, weights, 0.0), before they reach the output.")


def _rel_inverted(p: _Pair) -> str | None:
    if p.r.dtype != np.bool_ or p.a.shape != p.r.shape or not np.array_equal(p.a.astype(bool), ~p.r):
        return None
    return (f"{_cap(p.label)} has True and False the other way round: True should mark what may be "
            "attended (as in torch's scaled_dot_product_attention), False what is blocked.")


def _cap(text: str) -> str:
    """Upper-case the first letter only (str.capitalize would lower-case `W_q`)."""
    return text[:1].upper() + text[1:]


def _axes_words(perm: tuple[int, ...]) -> str:
    moved = [f"axis {i} holds the answer's axis {p}" for i, p in enumerate(perm) if i != p]
    return "; ".join(moved)


def _rel_axes(p: _Pair) -> str | None:
    if p.a.size != p.r.size or p.r.ndim > 6:
        return None
    def moves(t: np.ndarray) -> bool:  # a reordering that leaves the answer as it is proves nothing
        return t.shape != p.r.shape or not _close(t, p.r, p.ctx.ex.rtol, p.ctx.ex.atol)

    for perm in itertools.permutations(range(p.r.ndim)):
        t = np.transpose(p.r, perm)
        if t.shape == p.a.shape and perm != tuple(range(p.r.ndim)) and moves(t) and p.close(p.a, t):
            return (f"{_cap(p.label)} is the right array with its axes reordered (your {_axes_words(perm)}): "
                    "an axis is swapped or transposed. Check each transpose/swapaxes against the shape the "
                    f"signature asks for, {p.r.shape}.")
    for perm in itertools.permutations(range(p.r.ndim)):
        t = np.transpose(p.r, perm).reshape(p.a.shape)
        if moves(t) and p.close(p.a, t):
            if perm == tuple(range(p.r.ndim)):
                return ("wrong-shape", f"{_cap(p.label)} holds the right numbers in the right order, but with shape "
                        f"{p.a.shape}; expected {p.r.shape}. Reshape it (an axis of length 1 is missing or "
                        "extra, or the axes are not split/merged).")
            return (f"{_cap(p.label)} holds the right numbers in the wrong places: it is the answer with "
                    f"its axes reordered ({_axes_words(perm)}) and then reshaped to {p.a.shape}. A reshape "
                    "keeps memory order, so a reshape where a transpose belongs scrambles the data: transpose "
                    "(or moveaxis) first, then reshape.")
    return None


def _rel_reduced(p: _Pair) -> str | None:
    if p.a.ndim != p.r.ndim - 1:
        return None
    r = _f(p.r)
    for ax in range(p.r.ndim):
        for how, red in (("averaged over", r.mean(axis=ax)), ("summed over", r.sum(axis=ax)),
                         ("the first entry of", r.take(0, axis=ax))):
            if p.close(p.a, red):
                return (f"{_cap(p.label)} is the right array {how} axis {ax} (of size {p.r.shape[ax]}): "
                        f"that axis should stay, for a shape of {p.r.shape}; yours is {p.a.shape}.")
    return None


def _rel_blocks_reduced(p: _Pair) -> str | None:
    """The last axis should hold blocks side by side (a concatenation); the learner's holds them
    added or averaged."""
    if p.a.ndim != p.r.ndim or p.a.shape[:-1] != p.r.shape[:-1] or p.a.shape[-1] in (0, p.r.shape[-1]):
        return None
    b = p.a.shape[-1]
    if p.r.shape[-1] % b:
        return None
    blocks = _f(p.r).reshape(p.r.shape[:-1] + (p.r.shape[-1] // b, b))
    for how, red in (("adds", blocks.sum(axis=-2)), ("averages", blocks.mean(axis=-2))):
        if p.close(p.a, red):
            return (f"{_cap(p.label)} {how} the {p.r.shape[-1] // b} blocks of width {b} that the last axis "
                    f"should hold side by side (shape {p.r.shape}; yours is {p.a.shape}): concatenate them "
                    "instead.")
    return None


def _rel_slices(p: _Pair) -> str | None:
    if p.a.shape != p.r.shape:
        return None
    for ax in range(p.r.ndim):
        n = p.r.shape[ax]
        if n < 2:
            continue
        mapping = []
        for i in range(n):
            ai = p.a.take(i, axis=ax)
            # its own slice first: equal slices of the answer must not look misplaced
            match = next((j for j in [i, *range(n)] if p.close(ai, p.r.take(j, axis=ax))), None)
            if match is None:
                break
            mapping.append(match)
        else:
            # a reordering, or one slice copied everywhere; a shift is something else (an off-by-one)
            if len(set(mapping)) == 1:
                return (f"Along axis {ax} (size {n}) every slice of {p.label} is the answer's slice {mapping[0]}: "
                        "one item (a sequence of the batch, a head) is copied into every place. Compute each "
                        "item from its own inputs.")
            if mapping != list(range(n)) and sorted(mapping) == list(range(n)):
                wrong = next(i for i, j in enumerate(mapping) if i != j)
                return (f"Along axis {ax} (size {n}) {p.label} holds the right slices in the wrong places: your "
                        f"slice {wrong} is the answer's slice {mapping[wrong]} (order {mapping}). Items along "
                        "that axis (sequences in a batch, heads) must stay where they are.")
    return None


def _rel_plus_argument(p: _Pair) -> str | None:
    args = list(p.case.args)
    names = list(p.case.arg_names)
    if p.case.output_names:  # a module: its forward's first input
        args, names = [p.case.args[2][0]], ["x"]
    for name, v in zip(names, args):
        if isinstance(v, np.ndarray) and v.shape == p.r.shape and v.dtype.kind == "f":
            for sign, word in ((1, "plus"), (-1, "minus")):
                if p.close(p.a, _f(p.r) + sign * v):
                    return (f"{_cap(p.label)} is the right answer {word} `{name}`: an extra residual "
                            "connection (or a stray `x +`). Return only what the function computes.")
    return None


def _dims(case: Case) -> list[tuple[int, str]]:
    """Sizes in the case's arguments, with where they come from, for 'the factor is sqrt(4)'."""
    found: list[tuple[int, int, str]] = []
    names = case.arg_names or tuple(f"argument {i + 1}" for i in range(len(case.args)))
    for name, v in zip(names, case.args):
        if isinstance(v, np.ndarray):
            for ax, s in enumerate(v.shape):
                if s > 1:
                    found.append((v.ndim - ax, s, f"{name}.shape[{ax - v.ndim}]"))
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 1:
            found.append((0, int(v), name))
    # widths (last axes) before lengths and batch sizes: a scale is about the feature width
    return [(s, where) for _, s, where in sorted(found, key=lambda t: t[0])]


FACTOR = "<factor>"  # where a relation's message says what its fitted factor is


def _factor_words(pairs: list[_Pair]) -> str:
    """The factor as an expression of the cases' sizes ("= sqrt(Q.shape[-1])"), when one
    expression gives every failing case's factor; else nothing (a 2 is not "sqrt(4)" by chance)."""
    fitted = [(p.factor, p.case) for p in pairs if p.factor is not None]
    if not fitted:
        return ""
    c0, case0 = fitted[0]
    forms = (("sqrt({})", math.sqrt), ("{}", lambda s: s), ("1/sqrt({})", lambda s: 1 / math.sqrt(s)),
             ("1/{}", lambda s: 1 / s))
    for s, where in _dims(case0):
        for form, f in forms:
            if all(any(w == where and abs(c - f(n)) <= 1e-6 * max(1.0, abs(f(n))) for n, w in _dims(case))
                   for c, case in fitted):
                return f" (= {form.format(where)})"
    return ""


def _rel_sign(p: _Pair) -> str | None:
    if p.r.dtype == np.bool_ or p.a.shape != p.r.shape or not p.close(-_f(p.a)):
        return None
    return (f"{_cap(p.label)} has the right magnitudes with the opposite sign: every entry is "
            "negated. Check the order of a subtraction or a stray minus.")


def _rel_factor(p: _Pair) -> str | None:
    if p.r.dtype == np.bool_ or p.a.shape != p.r.shape:
        return None
    a, r = _f(p.a), _f(p.r)
    ok = np.isfinite(a) & np.isfinite(r)
    denom = float(np.sum(r[ok] * r[ok]))
    if denom == 0:
        return None
    c = float(np.sum(a[ok] * r[ok]) / denom)
    if abs(c - 1) < 1e-6 or abs(c + 1) < 1e-6 or abs(c) < 1e-12 or not p.close(a, c * r):
        return None
    p.factor = c
    return (f"{_cap(p.label)} is the right answer times {c:.6g}{FACTOR} on case "
            f"{p.case.name!r}: a constant factor is off. Look for a factor you multiply or divide by once "
            "too often, or not at all.")


# --- distributions ---------------------------------------------------------------------------


def _distribution_axis(r: np.ndarray) -> int | None:
    """The axis along which the reference output is a probability distribution (entries >= 0
    summing to 1, or all 0 for a row with nothing to attend to), if any."""
    if r.dtype.kind != "f" or r.ndim == 0 or not np.all(np.isfinite(r)) or np.any(r < -1e-12):
        return None
    for ax in [r.ndim - 1, *range(r.ndim - 1)]:
        if r.shape[ax] < 2 and ax != r.ndim - 1:  # one key is still a distribution over the keys
            continue
        sums = r.sum(axis=ax)
        if np.all(np.isclose(sums, 1.0) | np.isclose(sums, 0.0)) and np.any(np.isclose(sums, 1.0)):
            return ax
    return None


def _axis_words(ax: int, ndim: int) -> str:
    return "the last axis (axis=-1)" if ax == ndim - 1 else f"axis {ax} (axis={ax - ndim})"


def _live_rows(r: np.ndarray, ax: int) -> np.ndarray:
    """Rows (slices along ``ax``) of the reference that sum to 1, kept as a broadcastable mask."""
    return np.isclose(r.sum(axis=ax, keepdims=True), 1.0)


def _softmax(s: np.ndarray, ax: int) -> np.ndarray:
    m = np.max(s, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=ax, keepdims=True)
    return np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)


def _dist(p: _Pair) -> int | None:
    return _distribution_axis(p.r) if p.a.shape == p.r.shape and p.a.dtype.kind == "f" else None


def _rel_log_space(p: _Pair) -> str | None:
    ax = _dist(p)
    if ax is None:
        return None
    # Compared as probabilities: log of an underflowed probability is too coarse to compare.
    a = np.where(~np.isfinite(p.a) & (p.r == 0), -np.inf, p.a)
    if np.any(a > 1e-9) or not p.close(np.exp(a)):
        return None
    return (f"{_cap(p.label)} holds the logarithms of the right values (log-softmax): they are <= 0 "
            "and their exponentials sum to 1. Return the probabilities themselves: exp(x - max) / sum.")


def _rel_not_normalized(p: _Pair) -> str | None:
    ax = _dist(p)
    if ax is None:
        return None
    live = np.broadcast_to(_live_rows(p.r, ax), p.r.shape)
    a = np.where(live, p.a, 0.0)
    if np.any(a < 0) or not np.all(np.isfinite(a)):
        return None
    sums = a.sum(axis=ax, keepdims=True)
    if np.allclose(sums[_live_rows(p.r, ax)], 1.0):
        return None
    fixed = np.where(live, a / np.where(sums > 0, sums, 1.0), p.r)
    if not p.close(fixed):
        return None
    return (f"{_cap(p.label)} is proportional to the right values along {_axis_words(ax, p.r.ndim)} but "
            "does not sum to 1 there: divide by the sum along that axis (keepdims=True), not by anything else.")


def _rel_other_axis(p: _Pair) -> str | None:
    ax = _dist(p)
    if ax is None or np.any(p.a < -1e-12) or not np.all(np.isfinite(p.a)):
        return None
    for other in range(p.a.ndim):
        if other == ax:
            continue
        sums = p.a.sum(axis=other)
        if np.all(np.isclose(sums, 1.0) | np.isclose(sums, 0.0)) and np.any(np.isclose(sums, 1.0)):
            return (f"{_cap(p.label)} sums to 1 along {_axis_words(other, p.a.ndim)} instead of "
                    f"{_axis_words(ax, p.r.ndim)}: you normalize over the wrong axis. Take the max and the sum "
                    "along the axis whose entries should share one distribution.")
    return None


def _centered_logs(x: np.ndarray, pos: np.ndarray, ax: int) -> np.ndarray:
    lx = np.where(pos, np.log(np.where(pos, x, 1.0)), 0.0)
    n = pos.sum(axis=ax, keepdims=True)
    return np.where(pos, lx - lx.sum(axis=ax, keepdims=True) / np.maximum(n, 1), 0.0)


def _fit(y: np.ndarray, x: np.ndarray, pos: np.ndarray) -> float | None:
    den = float(np.sum(x[pos] * x[pos]))
    return None if den < 1e-12 else float(np.sum(y[pos] * x[pos]) / den)


def _rel_temperature(p: _Pair) -> str | None:
    """The learner's distribution is softmax(c * s) where the right one is softmax(s)."""
    ax = _dist(p)
    if ax is None or np.any(p.a < 0) or not np.all(np.isfinite(p.a)):
        return None
    pos = p.r > 0
    # Fit c where both are positive: one of the two may have underflowed to exact zeros.
    both = pos & (p.a > 0)
    c = _fit(_centered_logs(p.a, both, ax), _centered_logs(p.r, both, ax), both)
    if c is None or abs(c - 1) < 1e-6:
        return None
    # Where the right softmax underflowed and the learner's (flatter) did not, the scores are lost:
    # such a row must at least keep the order (those entries below every other one, or above
    # when c < 0), and is left out of the comparison.
    extra = (p.a > 0) & ~pos
    lo = np.where(pos, p.a, np.inf).min(axis=ax, keepdims=True)
    hi = np.where(pos, p.a, -np.inf).max(axis=ax, keepdims=True)
    if c > 0 and np.any(extra & (p.a > lo)) or c < 0 and np.any(extra & (p.a < hi)):
        return None
    keep = ~np.broadcast_to(extra.any(axis=ax, keepdims=True), p.r.shape)
    if not np.any(keep & both):
        return None
    cs = np.where(pos, c * np.log(np.where(pos, p.r, 1.0)), -np.inf)  # zeros stay zeros whatever c's sign
    live = np.broadcast_to(_live_rows(p.r, ax), p.r.shape) & keep
    if not p.close(np.where(live, p.a, 0.0), np.where(live, _softmax(cs, ax), 0.0)):
        return None
    if c < 0:
        return ("sign-flipped", f"{_cap(p.label)} gives the most weight to the lowest scores: it is the softmax of the "
                f"right scores times {c:.4g}. Check the sign of the scores (exp(x), not exp(-x)).")
    sharp = "sharper" if c > 1 else "flatter"
    p.factor = c
    return (f"{_cap(p.label)} is {sharp} than it should be: it is the softmax of the right scores "
            f"multiplied by {c:.4g}{FACTOR} on case {p.case.name!r}. The scores are scaled by "
            "the wrong factor: check the scale (1/sqrt(d_k) in attention, with d_k the width of the queries "
            "and keys) or temperature before the softmax.")


def _rel_scores(p: _Pair) -> str | None:
    """The learner returns scores s (up to a factor) whose softmax is the right distribution."""
    ax = _dist(p)
    if ax is None:
        return None
    pos = p.r > 0
    live = np.broadcast_to(_live_rows(p.r, ax), p.r.shape)
    use = pos & live & np.isfinite(p.a)
    if not np.any(use.sum(axis=ax) >= 2) or np.any(pos & live & ~np.isfinite(p.a)):
        return None
    a = np.where(use, p.a, 0.0)
    n = use.sum(axis=ax, keepdims=True)
    ca = np.where(use, a - a.sum(axis=ax, keepdims=True) / np.maximum(n, 1), 0.0)
    c = _fit(_centered_logs(p.r, use, ax), ca, use)
    if c is None or c <= 0:
        return None
    s = np.where(use, c * a, -np.inf)
    if not p.close(np.where(live, _softmax(s, ax), p.r)):
        return None
    scale = "" if abs(c - 1) < 1e-6 else f" (and scaled by {1 / c:.4g} against the right ones)"
    return (f"{_cap(p.label)} holds scores, not probabilities: their softmax along "
            f"{_axis_words(ax, p.r.ndim)} is the right answer{scale}. Return the weights, the softmax of the "
            "scores (masked where needed), rather than the scores themselves.")


# --- where the errors are --------------------------------------------------------------------


def _rel_diagonal(p: _Pair) -> str | None:
    """Errors only on the diagonal of a square matrix, or only off it."""
    if p.a.shape != p.r.shape or p.r.ndim < 2 or p.r.shape[-1] != p.r.shape[-2]:
        return None
    with np.errstate(all="ignore"):
        wrong = ~np.isclose(_f(p.a), _f(p.r), rtol=p.ctx.rtol, atol=p.ctx.atol, equal_nan=True)
    n = p.r.shape[-1]
    i, j = np.indices((n, n))
    offsets = np.unique(np.broadcast_to(j - i, wrong.shape)[wrong])
    if offsets.size == 1:
        k = int(offsets[0])
        where = "diagonal" if k == 0 else f"diagonal at offset {k} (entries [i, i{k:+d}])"
        return (f"{_cap(p.label)} is right everywhere except on the {where}: look at the term or the "
                "comparison that decides those entries (an off-by-one in `<` vs `<=`, or a diagonal term "
                "counted twice or not at all).")
    if not np.any(wrong & (i == j)):
        return ("wrong-off-diagonal", f"{_cap(p.label)} has the right diagonal but wrong entries off the diagonal: the terms "
                "where the two indices differ are wrong (a cross term missing, or an outer product where "
                "another one belongs).")
    return None


def _rel_precision(p: _Pair) -> str | None:
    # Fixed tolerances: "3-5 digits" means the same for every exercise; float32 ones have no digits to lose.
    if p.a.shape != p.r.shape or p.r.dtype != np.float64 or not _close(p.a, p.r, 1e-3, 1e-4):
        return None
    return (f"{_cap(p.label)} agrees with the answer to about 3-5 significant digits but not to the "
            "precision asked for: are you rounding, working in float32 (or float16), or approximating "
            "(a finite difference, a truncated series)? Compute exactly, in the exercise's dtype.")


RELATIONS: tuple[tuple[str, Relation], ...] = (
    ("wrong-dtype", _rel_dtype),
    ("nan-where-zero", _rel_nonfinite_where_zero),
    ("precision", _rel_precision),  # tiny errors first: any other relation would name noise
    ("values-inverted", _rel_inverted),
    ("axes-misplaced", _rel_axes),
    ("axis-reduced", _rel_reduced),
    ("blocks-added", _rel_blocks_reduced),
    ("wrong-on-diagonal", _rel_diagonal),
    ("slices-misplaced", _rel_slices),
    ("sign-flipped", _rel_sign),
    ("extra-term", _rel_plus_argument),
    ("log-space", _rel_log_space),
    ("not-normalized", _rel_not_normalized),
    ("normalized-wrong-axis", _rel_other_axis),
    ("scale-off", _rel_temperature),
    ("scores-not-weights", _rel_scores),
    ("constant-factor", _rel_factor),
)


# ---------------------------------------------------------------------------------------------
# 5. Right exactly when an argument is at its default


def _wrong_only_with(ctx: _Ctx) -> Diagnosis | None:
    bad = set(ctx.failing())
    if ctx.ex.harness is not None:
        fwd = {n: pos for n, (pos, d) in _forward_defaults(ctx.ex).items() if pos > 0 and d is not None}
        given = {n: [len(c.args[2]) > pos for c in ctx.cases] for n, pos in fwd.items()}
    else:
        defaults = _signature_defaults(ctx.ex)
        names = ctx.cases[0].arg_names
        given = {n: [not _equal(c.args[names.index(n)], d) for c in ctx.cases]
                 for n, d in defaults.items() if n in names}
        arrays = {n: [c.args[i] for c in ctx.cases] for i, n in enumerate(names)
                  if all(isinstance(c.args[i], np.ndarray) and c.args[i].dtype.kind == "f" for c in ctx.cases)}
        for n, values in arrays.items():
            least = min(v.ndim for v in values)
            given[f"{n}:batch"] = [v.ndim > least for v in values]
    for name, flags in given.items():
        if name.endswith(":batch") and any(flags) and not all(flags) and all(
                f == (i in bad) for i, f in enumerate(flags)):
            arg = name.removesuffix(":batch")
            least = min(np.ndim(c.args[ctx.cases[0].arg_names.index(arg)]) for c in ctx.cases)
            return Diagnosis(f"wrong-with-batch-axes:{arg}",
                             f"Your function is right on every case where `{arg}` has {least} axes and wrong (or "
                             f"raises) on every case where it has more, leading batch axes: some step assumes "
                             f"{least}-D arrays. `.T` reverses every axis (use np.swapaxes(a, -1, -2)), np.dot "
                             "and index [i, j] look at the first axes: write it for the last axes only.")
        if any(flags) and not all(flags) and all(f == (i in bad) for i, f in enumerate(flags)):
            return Diagnosis(f"wrong-with-argument:{name}",
                             f"Your function is right on every case where `{name}` is left at its default and "
                             f"wrong on every case where it is given: the mistake is in how you use `{name}`.")
    return None


DETECTORS: tuple[Callable[[_Ctx], Diagnosis | None], ...] = (
    _outputs_swapped,
    _changed_argument,
    _gradient_behind_right_output,  # before unused parameters: a detached output starves them all
    _unused_parameters,
    _per_output,
    _wrong_only_with,
)


# Every kind of generic diagnosis, in a few words: for summaries that count them across a class
# (the id's detail, after the colon, names the argument, output or parameter).
KINDS: dict[str, str] = {
    "outputs-swapped": "returns the right values in the wrong order",
    "ignores-argument": "ignores an argument (the detail names it)",
    "argument-inverted": "reads a boolean argument inverted",
    "argument-confused": "uses another argument where this one belongs",
    "arguments-swapped": "uses two arguments in each other's place",
    "argument-transposed": "uses a matrix argument transposed",
    "factor-off": "a constant factor missing or extra on a submodule's path",
    "gradient-wrong": "right output, gradient cut off or wrong",
    "parameter-unused": "a parameter gets no gradient",
    "wrong-dtype": "right values in the wrong dtype",
    "nan-where-zero": "NaN where the answer is 0 (rows with nothing to attend to)",
    "precision": "right to a few digits only",
    "values-inverted": "True and False swapped",
    "axes-misplaced": "axes swapped, or a reshape where a transpose belongs",
    "wrong-shape": "right numbers in the wrong shape",
    "axis-reduced": "an axis averaged or summed away",
    "blocks-added": "blocks added where they should be concatenated",
    "wrong-on-diagonal": "wrong only on one diagonal",
    "wrong-off-diagonal": "wrong only off the diagonal",
    "slices-misplaced": "items of an axis (batch, heads) misplaced or copied",
    "sign-flipped": "the sign flipped",
    "extra-term": "an input added to the output (a stray residual)",
    "log-space": "log-probabilities instead of probabilities",
    "not-normalized": "not normalized to sum to 1",
    "normalized-wrong-axis": "normalized along the wrong axis",
    "scale-off": "the scores scaled by the wrong factor before the softmax",
    "scores-not-weights": "scores returned in place of weights",
    "constant-factor": "the right answer times a constant",
    "wrong-with-argument": "wrong exactly when an argument is given",
    "wrong-with-batch-axes": "wrong exactly when inputs have batch axes",
}


def describe(diagnosis_id: str) -> str | None:
    """A generic diagnosis id (``kind`` or ``kind:detail``) in a few words, or None if it is not one."""
    kind, _, detail = diagnosis_id.partition(":")
    words = KINDS.get(kind)
    return None if words is None else words + (f" ({detail})" if detail else "")
