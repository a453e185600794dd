"""The chapter-01 checks are discriminating: right code passes, each known mistake is named.

Every learner-style function below is written independently of the misconception variants in
``mhsa_ref/exercises/ch01.py`` (none are imported) and in other styles: Python loops with
``math.exp``, ``np.einsum``, ``np.apply_along_axis``, transposes, reshapes into rows. When the
judge names one of them correctly it has matched *behaviour*, not code.

Sections:
1. correct implementations pass under several seeds;
2. each wrong implementation fails and is named with the right misconception id;
3. not-implemented functions and the ``@exercise`` fallback;
4. errors and malformed outputs (never "passed");
5. what ``check`` prints;
6. seeds are honoured;
and, last, regressions for judge bugs found while writing this file.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap

import numpy as np
import pytest

from mhsa_ref import attention as ref
from mhsa_ref import exercises
from mhsa_ref.checks import check, evaluate, exercise, format_verdict

SOFTMAX = "01.softmax"
SDPA = "01.scaled_dot_product_attention"

# The public seed, a couple of others and a large one: a correct function must pass them all.
SEEDS = (0, 1, 2, 12345)


# ============================================================================================
# Learner-style softmax implementations
# ============================================================================================

# --- correct -------------------------------------------------------------------------------


def softmax_logsumexp(x, axis=-1):
    """Vectorised: p = exp(x - logsumexp(x)), the log-domain way."""
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - lse)


def softmax_loops(x, axis=-1):
    """Pure Python over rows: move `axis` last, flatten to rows, math.exp one number at a time."""
    moved = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    result = np.empty_like(rows)
    for r, row in enumerate(rows):
        biggest = max(row)
        exps = [math.exp(v - biggest) for v in row]
        total = sum(exps)
        for c, e in enumerate(exps):
            result[r, c] = e / total
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


def softmax_apply_along_axis(x, axis=-1):
    """One 1-D softmax applied to every slice by NumPy."""

    def one(v):
        e = np.exp(v - v.max())
        return e / e.sum()

    return np.apply_along_axis(one, axis, x)


CORRECT_SOFTMAX = [ref.softmax, softmax_logsumexp, softmax_loops, softmax_apply_along_axis]

# --- wrong: each has exactly one mistake ---------------------------------------------------


def softmax_no_max(x, axis=-1):
    """Textbook formula straight from the slide: exp(1000) overflows to inf, inf/inf = NaN."""
    return np.apply_along_axis(lambda v: np.exp(v) / np.exp(v).sum(), axis, x)


def softmax_global_max(x, axis=-1):
    """Subtracts the largest entry of the whole array (a Python max over every element)."""
    biggest = max(np.ravel(x))
    e = np.exp(x - biggest)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_always_axis0(x, axis=-1):
    """Normalises along axis 0 whatever `axis` says: softmax over the last axis of x.T."""
    t = np.asarray(x).T  # x.T's last axis is x's first
    e = np.exp(t - t.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).T


def softmax_ignores_axis(x, axis=-1):
    """Always normalises the last axis: flattens to rows of length x.shape[-1] and loops."""
    rows = np.asarray(x, dtype=float).reshape(-1, np.shape(x)[-1])
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        e = np.exp(row - row.max())
        out[i] = e / e.sum()
    return out.reshape(np.shape(x))


def softmax_axis_minus2(x, axis=-1):
    """Thinks of rows of a matrix as axis -2 (like a column softmax); ignores `axis`."""
    e = np.exp(x - np.max(x, axis=-2, keepdims=True))
    return e / np.sum(e, axis=-2, keepdims=True)


def softmax_max_no_keepdims(x, axis=-1):
    """keepdims forgotten in the max only; the sum is right."""
    m = x.max(axis=axis)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    """keepdims forgotten in the sum only; the max is right."""
    e = np.exp(x - np.amax(x, axis=axis, keepdims=True))
    total = e.sum(axis)
    return e / total


def softmax_float32(x, axis=-1):
    """Correct maths, but in float32 (e.g. copied from a PyTorch habit)."""
    x32 = np.asarray(x, dtype=np.float32)
    e = np.exp(x32 - x32.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_in_place(x, axis=-1):
    """Correct result, but overwrites the caller's array to save memory."""
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x


# ============================================================================================
# Learner-style attention implementations
# ============================================================================================


def _my_softmax(z, axis=-1):
    """The learner's own softmax from exercise 1, reused: a slice that is all -inf gives zeros
    (so a query with no allowed key gets zero weights)."""
    z = np.moveaxis(z, axis, -1)
    live = ~np.all(np.isneginf(z), axis=-1, keepdims=True)
    z = np.where(live, z, 0.0)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    p = np.where(live, e / e.sum(axis=-1, keepdims=True), 0.0)
    return np.moveaxis(p, -1, axis)


# --- correct -------------------------------------------------------------------------------


def sdpa_einsum(Q, K, V, mask=None):
    """einsum for both products; fully masked rows fixed by hand."""
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)  # all keys blocked: exp(-inf - 0) = 0, not NaN
    e = np.exp(scores - top)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return np.einsum("...qk,...kv->...qv", weights, V), weights


def sdpa_matmul(Q, K, V, mask=None):
    """@ and swapaxes; a fully masked row is replaced by zeros before the softmax, then zeroed."""
    scores = (Q @ np.swapaxes(K, -1, -2)) * (1.0 / math.sqrt(Q.shape[-1]))
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    scores = np.where(mask, scores, -np.inf)
    has_key = np.any(mask, axis=-1, keepdims=True)
    scores = np.where(has_key, scores, 0.0)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(has_key, e / e.sum(axis=-1, keepdims=True), 0.0)
    return weights @ V, weights


def sdpa_loops(Q, K, V, mask=None):
    """Loops over every batch index and query; only allowed keys enter the sum."""
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (Lq, d_k), Lk, d_v = Q.shape[-2:], K.shape[-2], V.shape[-1]
    Qb = np.broadcast_to(Q, batch + (Lq, d_k))
    Kb = np.broadcast_to(K, batch + (Lk, d_k))
    Vb = np.broadcast_to(V, batch + (Lk, d_v))
    Mb = np.broadcast_to(True if mask is None else mask, batch + (Lq, Lk))
    out = np.zeros(batch + (Lq, d_v))
    weights = np.zeros(batch + (Lq, Lk))
    for b in np.ndindex(*batch):
        for i in range(Lq):
            allowed = [j for j in range(Lk) if Mb[b][i, j]]
            if not allowed:
                continue  # nothing to attend to: weights and output stay zero
            scores = {j: float(np.dot(Qb[b][i], Kb[b][j])) / math.sqrt(d_k) for j in allowed}
            top = max(scores.values())
            exps = {j: math.exp(s - top) for j, s in scores.items()}
            total = sum(exps.values())
            for j, e in exps.items():
                weights[b + (i, j)] = e / total
                out[b + (i,)] += (e / total) * Vb[b][j]
    return out, weights


CORRECT_SDPA = [ref.scaled_dot_product_attention, sdpa_einsum, sdpa_matmul, sdpa_loops]

# --- wrong: each has exactly one mistake; masked rows handled correctly unless that is it ---


def sdpa_no_scale(Q, K, V, mask=None):
    scores = np.einsum("...id,...jd->...ij", Q, K)  # forgot / sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores)
    return w @ V, w


def sdpa_divide_by_dk(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]  # d_k, not sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores)
    return w @ V, w


def sdpa_sqrt_dv(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(V.shape[-1])  # the value width
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores)
    return w @ V, w


def sdpa_softmax_over_queries(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores, axis=-2)  # normalises each key's column
    if mask is not None:
        w = np.where(np.any(mask, axis=-1, keepdims=True), w, 0.0)
    return w @ V, w


def sdpa_mask_after_softmax(Q, K, V, mask=None):
    w = _my_softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]))
    if mask is not None:
        w = np.where(mask, w, 0.0)  # blocked keys zeroed, rows not renormalised
    return w @ V, w


def sdpa_mask_fill_zero(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is None:
        w = _my_softmax(scores)
    else:
        w = _my_softmax(scores * mask)  # blocked scores become 0, and exp(0) = 1
        w = w * np.any(mask, axis=-1, keepdims=True)  # rows with no allowed key -> zero
    return w @ V, w


def sdpa_mask_inverted(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)  # reads True as "blocked"
    w = _my_softmax(scores)
    return w @ V, w


def sdpa_nan_rows(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))  # all -inf row: -inf - -inf = NaN
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def sdpa_fill_minus_1e9(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)  # the common "large negative" trick
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def sdpa_returns_scores(Q, K, V, mask=None):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores)
    return w @ V, scores  # should be w


def sdpa_float32(Q, K, V, mask=None):
    Q, K, V = (np.asarray(a, dtype=np.float32) for a in (Q, K, V))
    scores = Q @ np.swapaxes(K, -1, -2) / np.float32(np.sqrt(Q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, np.float32(-np.inf))
    w = _my_softmax(scores).astype(np.float32)
    return w @ V, w


def sdpa_in_place(Q, K, V, mask=None):
    Q /= np.sqrt(Q.shape[-1])  # scales the caller's Q
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    w = _my_softmax(scores)
    return w @ V, w


# ============================================================================================
# 1. Correct implementations pass, under every seed
# ============================================================================================


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fn", CORRECT_SOFTMAX, ids=lambda f: f.__name__)
def test_correct_softmax_passes(fn, seed):
    v = evaluate(fn, SOFTMAX, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fn", CORRECT_SDPA, ids=lambda f: f.__name__)
def test_correct_attention_passes(fn, seed):
    v = evaluate(fn, SDPA, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


def test_cases_include_fully_masked_rows():
    # The correct SDPAs above only prove the zero-row rule if the cases contain such rows.
    for case in exercises.get(SDPA).cases(0):
        mask = case.args[3]
        if mask is not None:
            _, w = ref.scaled_dot_product_attention(*case.args)
            if not np.broadcast_to(mask, w.shape).any(axis=-1).all():
                return
    pytest.fail("no public SDPA case has a query with every key masked")


# ============================================================================================
# 2. Each wrong implementation fails with the right misconception named
# ============================================================================================

WRONG_SOFTMAX = [
    ("softmax-no-max-subtraction", softmax_no_max),
    ("softmax-global-max", softmax_global_max),
    ("softmax-wrong-axis", softmax_always_axis0),
    ("softmax-wrong-axis", softmax_ignores_axis),
    ("softmax-wrong-axis", softmax_axis_minus2),
    ("softmax-missing-keepdims", softmax_max_no_keepdims),
    ("softmax-missing-keepdims", softmax_sum_no_keepdims),
    ("float32-output", softmax_float32),
    ("input-modified-in-place", softmax_in_place),
]

WRONG_SDPA = [
    ("sdpa-missing-scale", sdpa_no_scale),
    ("sdpa-divide-by-dk", sdpa_divide_by_dk),
    ("sdpa-scale-by-sqrt-dv", sdpa_sqrt_dv),
    ("sdpa-softmax-over-queries", sdpa_softmax_over_queries),
    ("sdpa-mask-after-softmax", sdpa_mask_after_softmax),
    ("sdpa-mask-fill-zero", sdpa_mask_fill_zero),
    ("sdpa-mask-inverted", sdpa_mask_inverted),
    ("sdpa-nan-fully-masked-rows", sdpa_nan_rows),
    ("sdpa-masked-rows-uniform", sdpa_fill_minus_1e9),
    ("sdpa-returns-scores", sdpa_returns_scores),
    ("float32-output", sdpa_float32),
    ("input-modified-in-place", sdpa_in_place),
]


def _params(pairs):
    return [
        pytest.param(
            mid,
            fn,
            id=f"{mid}/{fn.__name__}",
        )
        for mid, fn in pairs
    ]


def _assert_named(fn, exercise_id, mid, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    shown = format_verdict(v)
    assert v.status == "failed", shown
    assert v.misconception == mid, shown
    assert f"[{mid}]" in shown  # the learner sees the id next to its explanation


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("mid, fn", _params(WRONG_SOFTMAX))
def test_wrong_softmax_is_named(mid, fn, seed):
    _assert_named(fn, SOFTMAX, mid, seed)


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("mid, fn", _params(WRONG_SDPA))
def test_wrong_attention_is_named(mid, fn, seed):
    _assert_named(fn, SDPA, mid, seed)


def test_every_registered_misconception_is_exercised():
    # Keeps this file in step with the registry: a new misconception needs a learner here.
    covered = {mid for mid, _ in WRONG_SOFTMAX + WRONG_SDPA}
    for ex_id in (SOFTMAX, SDPA):
        registered = {m.id for m in exercises.get(ex_id).misconceptions}
        assert registered <= covered, registered - covered


# ============================================================================================
# 3. Not implemented, and the @exercise fallback
# ============================================================================================


def _todo_softmax(x, axis=-1):
    raise NotImplementedError


def _todo_attention(Q, K, V, mask=None):
    raise NotImplementedError


@pytest.mark.parametrize("exercise_id, fn", [(SOFTMAX, _todo_softmax), (SDPA, _todo_attention)])
def test_raise_not_implemented_is_not_implemented(exercise_id, fn):
    v = evaluate(fn, exercise_id)
    assert (v.status, v.misconception) == ("not_implemented", None)
    assert format_verdict(v).startswith(f"⏳ {exercise_id}: not implemented yet")


def test_exercise_fallback_notes_once_and_is_never_graded(capsys):
    @exercise
    def softmax(x, axis=-1):  # found by its name
        raise NotImplementedError

    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    # Calls fall back to the reference so the rest of the chapter runs ...
    np.testing.assert_array_equal(softmax(x), ref.softmax(x))
    np.testing.assert_array_equal(softmax(x, axis=0), ref.softmax(x, axis=0))
    out = capsys.readouterr().out
    # ... with exactly one note (two short lines), the first time only.
    assert out.count("note:") == 1 and out.startswith("note: softmax is not implemented yet")
    words = " ".join(out.split())  # wrapped to fit a notebook's output area
    assert "01.softmax" in words and "reference solution stands in" in words

    # The judge looks at the learner's own body, never the fallback.
    assert evaluate(softmax).status == "not_implemented"
    check(softmax)
    out = capsys.readouterr().out
    assert out.startswith("⏳ 01.softmax: not implemented yet")
    assert "passed" not in out and "note:" not in out


def test_exercise_fallback_with_explicit_id(capsys):
    @exercise(id=SDPA)
    def attention(Q, K, V, mask=None):  # a name the registry does not know
        raise NotImplementedError

    Q, K, V = np.eye(2), np.ones((3, 2)), np.arange(6.0).reshape(3, 2)
    mask = np.array([[True, False, True], [False, False, False]])
    got, want = attention(Q, K, V, mask), ref.scaled_dot_product_attention(Q, K, V, mask)
    attention(Q, K, V)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert capsys.readouterr().out.count("note:") == 1
    v = evaluate(attention)
    assert (v.exercise, v.status) == (SDPA, "not_implemented")


@pytest.mark.parametrize(
    "exercise_id, fn, status, mid",
    [
        (SOFTMAX, softmax_loops, "passed", None),
        (SOFTMAX, softmax_global_max, "failed", "softmax-global-max"),
        (SDPA, sdpa_einsum, "passed", None),
        (SDPA, sdpa_nan_rows, "failed", "sdpa-nan-fully-masked-rows"),
    ],
    ids=lambda p: getattr(p, "__name__", None),
)
def test_implemented_exercise_is_judged_on_own_code(capsys, exercise_id, fn, status, mid):
    # A decorated, implemented function: no fallback, no note, its own mistakes are named.
    learner = exercise(fn, id=exercise_id)
    v = evaluate(learner)
    assert (v.exercise, v.status, v.misconception) == (exercise_id, status, mid)
    assert "note:" not in capsys.readouterr().out


# ============================================================================================
# 4. Errors and malformed outputs: reported, never "passed"
# ============================================================================================


def _unrelated_bug_softmax(x, axis=-1):
    settings = {"axis": axis}
    return np.exp(x) / settings["temperature"]  # KeyError, not a known mistake


def _unrelated_bug_attention(Q, K, V, mask=None):
    cache = {}
    return cache[Q.shape], None


@pytest.mark.parametrize(
    "exercise_id, fn", [(SOFTMAX, _unrelated_bug_softmax), (SDPA, _unrelated_bug_attention)]
)
def test_unrelated_exception_is_an_error(exercise_id, fn):
    v = evaluate(fn, exercise_id)
    assert (v.status, v.misconception) == ("error", None)
    assert "KeyError" in v.feedback
    assert format_verdict(v).startswith(f"❌ {exercise_id}: raised an error")


class AlwaysEqual(np.ndarray):
    """An ndarray whose comparisons lie: == always True, != always False, ufuncs hijacked."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __array_ufunc__(self, *args, **kwargs):
        return True


def _softmax_returning(make):
    def learner(x, axis=-1):
        return make(ref.softmax(x, axis), x)

    learner.__name__ = f"softmax_{make.__name__}"
    return learner


def _attention_returning(make):
    def learner(Q, K, V, mask=None):
        return make(*ref.scaled_dot_product_attention(Q, K, V, mask))

    learner.__name__ = f"attention_{make.__name__}"
    return learner


def as_list(p, x):
    return p.tolist()


def extra_axis(p, x):
    return p[None]


def object_array(p, x):
    return p.astype(object)


def lying_subclass(p, x):
    return np.full(p.shape, 0.5).view(AlwaysEqual)  # wrong values, "equal" to anything


def integers(p, x):
    return (p * 100).astype(np.int64)


def one_tuple(out, w):
    return (out,)


def list_pair(out, w):
    return [out, w]


def three_values(out, w):
    return out, w, w


def weights_extra_axis(out, w):
    return out, w[..., None]


def object_weights(out, w):
    return out, w.astype(object)


def lying_weights(out, w):
    return out, np.zeros(w.shape).view(AlwaysEqual)


def lists_pair(out, w):
    return out.tolist(), w.tolist()


MALFORMED = [
    (SOFTMAX, _softmax_returning(f))
    for f in (as_list, extra_axis, object_array, lying_subclass, integers)
] + [
    (SDPA, _attention_returning(f))
    for f in (
        one_tuple, list_pair, three_values, weights_extra_axis, object_weights, lying_weights, lists_pair
    )
]


@pytest.mark.parametrize("exercise_id, fn", MALFORMED, ids=lambda p: getattr(p, "__name__", None))
def test_malformed_output_fails(exercise_id, fn):
    # Right numbers in the wrong container (or wrong numbers in a lying one) never pass, and
    # are not blamed on a maths misconception.
    v = evaluate(fn, exercise_id)
    assert (v.status, v.misconception) == ("failed", None), format_verdict(v)


# ============================================================================================
# 5. What check() prints
# ============================================================================================


def _code_lines(fn) -> set[str]:
    """The reference's own code lines (docstring left out), stripped, long enough to be telling."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0].body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    src = textwrap.dedent(inspect.getsource(fn)).splitlines()
    lines = {src[i].strip() for stmt in body for i in range(stmt.lineno - 1, stmt.end_lineno)}
    return {ln for ln in lines if len(ln) >= 16 and not ln.startswith("#")}


REFERENCE_CODE = _code_lines(ref.softmax) | _code_lines(ref.scaled_dot_product_attention)


def test_reference_code_lines_are_found():
    # Guards the leak test below against an empty or wrong set of lines.
    assert any("np.max(x, axis=axis, keepdims=True)" in ln for ln in REFERENCE_CODE)
    assert any("np.swapaxes(K, -1, -2)" in ln for ln in REFERENCE_CODE)


@pytest.mark.parametrize(
    "fn, exercise_id", [(ref.softmax, SOFTMAX), (ref.scaled_dot_product_attention, SDPA)]
)
def test_check_prints_passed(capsys, fn, exercise_id):
    assert check(fn) is None  # resolved by the function's name
    out = capsys.readouterr().out
    assert out.startswith(f"✅ {exercise_id}: passed")
    assert out.count("\n") == 1  # one line, nothing else


@pytest.mark.parametrize(
    "exercise_id, mid, fn",
    [(SOFTMAX, mid, fn) for mid, fn in WRONG_SOFTMAX[:3]]
    + [(SDPA, mid, fn) for mid, fn in WRONG_SDPA[:8]],
    ids=lambda p: getattr(p, "__name__", None),
)
def test_check_names_mistake_without_leaking_reference(capsys, exercise_id, mid, fn):
    check(fn, exercise_id)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ {exercise_id}: not yet right")
    assert mid in out
    leaked = {ln for ln in REFERENCE_CODE if ln in out}
    assert not leaked, leaked
    assert "np.where(np.isfinite(m), m, 0.0)" not in out


# ============================================================================================
# 6. Seeds are honoured
# ============================================================================================


@pytest.mark.parametrize("seed", SEEDS)
def test_verdict_records_seed(seed):
    assert evaluate(softmax_loops, SOFTMAX, seed=seed).seed == seed
    assert evaluate(sdpa_no_scale, SDPA, seed=seed).seed == seed
    assert evaluate(_todo_softmax, SOFTMAX, seed=seed).seed == seed
    assert evaluate(ref.softmax).seed == 0  # check()'s public seed


def _arrays(case):
    return [a for a in case.args if isinstance(a, np.ndarray)]


def _same(c1, c2):
    a1, a2 = _arrays(c1), _arrays(c2)
    return len(a1) == len(a2) and all(np.array_equal(x, y) for x, y in zip(a1, a2))


@pytest.mark.parametrize("exercise_id", [SOFTMAX, SDPA])
def test_seeds_change_random_cases_only(exercise_id):
    ex = exercises.get(exercise_id)
    c0, c0_again, c1 = ex.cases(0), ex.cases(0), ex.cases(1)
    # Same seed, same cases: a verdict can be reproduced.
    assert all(_same(a, b) and a.name == b.name for a, b in zip(c0, c0_again, strict=True))
    fixed0 = [c for c in c0 if not c.name.startswith("random")]
    fixed1 = [c for c in c1 if not c.name.startswith("random")]
    random0 = [c for c in c0 if c.name.startswith("random")]
    random1 = [c for c in c1 if c.name.startswith("random")]
    assert fixed0 and random0 and len(random0) == len(random1)
    # The fixed cases keep their names, shapes and the non-float arguments (axis, masks) ...
    # (their float values, e.g. Q, K, V, are drawn from the seed too: only the structure that
    # exposes each mistake is fixed, so answers cannot be memorised; see the test below).
    assert [c.name for c in fixed0] == [c.name for c in fixed1]
    for a, b in zip(fixed0, fixed1):
        for x, y in zip(a.args, b.args, strict=True):
            if isinstance(x, np.ndarray) and x.dtype.kind == "f":
                assert x.shape == y.shape, a.name
            else:
                assert (x is None and y is None) or np.array_equal(x, y), a.name
    # ... and the random cases get new numbers.
    assert not any(_same(a, b) for a, b in zip(random0, random1))


def test_softmax_hand_picked_cases_are_seed_independent():
    # The literal inputs that expose overflow, a global max and equal logits never change.
    c0, c1 = exercises.get(SOFTMAX).cases(0), exercises.get(SOFTMAX).cases(1)
    literal = {
        "three logits", "huge logits (around 1000)", "rows far apart (+1000 and -1000)", "equal logits"
    }
    pairs = [(a, b) for a, b in zip(c0, c1) if a.name in literal]
    assert len(pairs) == len(literal)
    assert all(_same(a, b) and a.args[1] == b.args[1] for a, b in pairs)


def test_memorised_public_answers_fail_other_seeds():
    # A learner who tabulates the public outputs passes seed 0 and nothing else.
    public = exercises.get(SOFTMAX).cases(0)
    table = {(c.args[0].tobytes(), c.args[1]): ref.softmax(*c.args) for c in public}

    def softmax(x, axis=-1):
        return table.get((x.tobytes(), axis), np.zeros_like(x))

    assert evaluate(softmax, seed=0).status == "passed"
    assert evaluate(softmax, seed=1).status == "failed"


# ============================================================================================
# Regressions: bugs found while writing this file, now fixed
# ============================================================================================


def test_softmax_returning_one_tuple_is_not_passed():
    # A stray trailing comma returns the 1-tuple (p,); it must not be unpacked into p.
    def softmax(x, axis=-1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True),)

    assert evaluate(softmax).status != "passed"


# Wrapping the @exercise wrapper again must not let the reference fallback be graded.
@pytest.mark.parametrize("how", ["exercise twice", "functools.wraps on top"])
def test_wrapped_exercise_is_still_not_implemented(capsys, how):
    import functools

    @exercise
    def softmax(x, axis=-1):
        raise NotImplementedError

    if how == "exercise twice":  # e.g. a notebook cell re-run on the decorated function
        learner = exercise(softmax)
    else:

        @functools.wraps(softmax)
        def learner(*args, **kwargs):
            return softmax(*args, **kwargs)

    assert evaluate(learner).status == "not_implemented"


def test_error_feedback_points_at_the_learners_line():
    def softmax(x, axis=-1):
        total = x.sum(axis=axis, keepdims=True)
        return np.exp(x) / totl  # noqa: F821  (the typo is the point)

    v = evaluate(softmax, SOFTMAX)
    assert v.status == "error"
    assert "NameError" in v.feedback and "`return np.exp(x) / totl" in v.feedback
    assert "(line " in v.feedback
