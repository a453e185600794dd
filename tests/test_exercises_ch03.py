"""The chapter-03 checks are discriminating: right masks pass, each known mistake is named.

Every learner-style function below is written independently of the misconception variants in
``mhsa_ref/exercises/ch03.py`` (none are imported) and in other styles: Python loops, list
comprehensions, ``np.tril``/``np.triu``, ``np.fromfunction``, ``np.outer``, ``np.einsum``,
``np.repeat``/``np.tile``. When the judge names one of them it has matched *behaviour*.

Sections:
1. correct implementations pass under several seeds;
2. each wrong implementation fails and is named with the right misconception id;
3. not implemented, errors, what ``check`` prints.

A note on the judge (mhsa_ref/judge.py, not ours to edit): when a *boolean* output has the
right shape and dtype but wrong values, the judge computes ``arr - expected`` to report the
largest difference, and NumPy refuses to subtract booleans (TypeError). Until that is fixed,
``evaluate`` raises for such learners. The tests that need it are marked xfail only while a
probe (``_judge_compares_bool_values``) still sees the bug, so they run normally, and must
pass, as soon as the judge is fixed. The same learners are proven rejected and named without
that code path, through ``judge.diagnose`` (``test_wrong_is_rejected_and_diagnosed``).
"""

from __future__ import annotations

import numpy as np
import pytest

from mhsa_ref import exercises
from mhsa_ref import masks as ref
from mhsa_ref.checks import check, evaluate, format_verdict
from mhsa_ref.judge import call, diagnose

CAUSAL = "03.causal_mask"
PADDING = "03.padding_mask"
BUILD = "03.build_attention_mask"
SEEDS = (0, 1, 2, 12345)


def test_regression_judge_reports_wrong_boolean_values():
    # The judge once subtracted boolean arrays to measure the difference, which numpy refuses.
    v = evaluate(lambda L: np.zeros((L, L), dtype=bool), CAUSAL)
    assert v.status == "failed"


# ============================================================================================
# Correct implementations
# ============================================================================================


def causal_loops(L):
    """Two Python loops filling a boolean matrix."""
    m = np.zeros((L, L), dtype=bool)
    for i in range(L):
        for j in range(i + 1):
            m[i, j] = True
    return m


def causal_tril(L):
    return np.tril(np.ones((L, L), dtype=bool))


def causal_fromfunction(L):
    return np.fromfunction(lambda i, j: j <= i, (L, L), dtype=int)


def causal_not_future(L):
    """Start from the future (strict upper triangle) and negate it."""
    return ~np.triu(np.ones((L, L), dtype=bool), k=1)


CORRECT_CAUSAL = [ref.causal_mask, causal_loops, causal_tril, causal_fromfunction, causal_not_future]


def padding_loops(lengths, L):
    return np.array([[t < n for t in range(L)] for n in lengths], dtype=bool).reshape(len(lengths), L)


def padding_broadcast(lengths, L):
    return np.arange(L) < np.expand_dims(lengths, 1)


def padding_ge(lengths, L):
    """lengths[b] > t, written the other way round, with np.greater.outer."""
    return np.greater.outer(np.asarray(lengths), np.arange(L))


CORRECT_PADDING = [ref.padding_mask, padding_loops, padding_broadcast, padding_ge]


def build_loops(lengths, L, causal=False):
    B = len(lengths)
    m = np.zeros((B, 1, L, L), dtype=bool)
    for b in range(B):
        for i in range(L):
            for j in range(L):
                m[b, 0, i, j] = j < lengths[b] and (j <= i or not causal)
    return m


def build_tile(lengths, L, causal=False):
    """Keys tiled over the query rows with np.tile, then the triangle with np.logical_and."""
    keys = np.arange(L) < np.asarray(lengths).reshape(-1, 1)  # (B, L)
    m = np.tile(keys[:, np.newaxis, :], (1, L, 1))  # (B, L, L)
    if causal:
        m = np.logical_and(m, np.tril(np.ones((L, L), dtype=bool)))
    return np.expand_dims(m, 1)


def build_einsum(lengths, L, causal=False):
    """An outer product of 0/1 indicators, converted back to bool (the final dtype is right)."""
    keys = (np.arange(L) < np.asarray(lengths)[:, None]).astype(int)  # (B, L)
    rows = np.ones((len(lengths), L), dtype=int)
    tri = np.tril(np.ones((L, L), dtype=int)) if causal else np.ones((L, L), dtype=int)
    return (np.einsum("bi,bj,ij->bij", rows, keys, tri) > 0)[:, None]


CORRECT_BUILD = [ref.build_attention_mask, build_loops, build_tile, build_einsum]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "exercise_id, fn",
    [(CAUSAL, f) for f in CORRECT_CAUSAL] + [(PADDING, f) for f in CORRECT_PADDING] + [(BUILD, f) for f in CORRECT_BUILD],
    ids=lambda p: getattr(p, "__name__", p),
)
def test_correct_implementations_pass(exercise_id, fn, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


def test_cases_cover_the_edges():
    pad_cases = exercises.get(PADDING).cases(0)
    assert any(0 in c.args[0] for c in pad_cases) and any(c.args[1] == 1 for c in pad_cases)
    assert any(len(c.args[0]) == c.args[1] for c in pad_cases)  # B == L: transposed fits
    assert any((c.args[0] == c.args[1]).any() and (c.args[0] < c.args[1]).any() for c in pad_cases)
    build_cases = exercises.get(BUILD).cases(0)
    assert {c.args[2] for c in build_cases} == {True, False}
    assert any(0 in c.args[0] for c in build_cases) and any(c.args[1] == 1 for c in build_cases)
    assert 1 in [c.args[0] for c in exercises.get(CAUSAL).cases(0)]


# ============================================================================================
# Wrong implementations: each has exactly one mistake
# ============================================================================================


def causal_upper(L):
    return np.fromfunction(lambda i, j: j >= i, (L, L), dtype=int)


def causal_future_true(L):
    """PyTorch nn.MultiheadAttention habit: True marks what is blocked."""
    return np.array([[j > i for j in range(L)] for i in range(L)], dtype=bool).reshape(L, L)


def causal_strict(L):
    m = np.zeros((L, L), dtype=bool)
    for i in range(L):
        m[i, :i] = True  # forgets the diagonal
    return m


def causal_int(L):
    return np.tril(np.ones((L, L), dtype=np.int32))


def causal_float(L):
    return (np.arange(L)[:, None] >= np.arange(L)).astype(float)


def padding_le(lengths, L):
    return np.array([[t <= n for t in range(L)] for n in lengths], dtype=bool).reshape(len(lengths), L)


def padding_int(lengths, L):
    m = np.zeros((len(lengths), L), dtype=np.int64)
    for b, n in enumerate(lengths):
        m[b, :n] = 1
    return m


def padding_transposed(lengths, L):
    return np.less.outer(np.arange(L), np.asarray(lengths))  # (L, B)


def padding_in_place(lengths, L):
    lengths -= 0  # harmless for ints ... but then:
    lengths[:] = np.minimum(lengths, L)
    out = np.arange(L) < lengths[:, None]
    lengths += 1  # "tidying up" the caller's array
    return out


def _keys(lengths, L):
    return np.arange(L)[None, :] < np.asarray(lengths)[:, None]


def build_no_head_axis(lengths, L, causal=False):
    m = np.repeat(_keys(lengths, L)[:, None, :], L, axis=1)
    return m & np.tril(np.ones((L, L), dtype=bool)) if causal else m


def build_blocks_queries(lengths, L, causal=False):
    m = np.repeat(_keys(lengths, L)[:, :, None], L, axis=2)  # rows, not columns
    if causal:
        m = m & np.tril(np.ones((L, L), dtype=bool))
    return m[:, None]


def build_blocks_both(lengths, L, causal=False):
    k = _keys(lengths, L)
    m = np.einsum("bi,bj->bij", k, k)  # real query AND real key
    if causal:
        m = m & (np.arange(L)[None, :] <= np.arange(L)[:, None])
    return m[:, None]


def build_transposed(lengths, L, causal=False):
    m = build_loops(lengths, L, causal)
    return np.transpose(m, (0, 1, 3, 2))


def build_never_causal(lengths, L, causal=False):
    return build_loops(lengths, L, causal=False)


def build_always_causal(lengths, L, causal=False):
    return build_tile(lengths, L, causal=True)


def build_upper(lengths, L, causal=False):
    m = build_tile(lengths, L, causal=False)
    if causal:
        m = m & np.triu(np.ones((L, L), dtype=bool))
    return m


def build_strict(lengths, L, causal=False):
    m = build_tile(lengths, L, causal=False)
    if causal:
        m = m & (np.arange(L)[None, :] < np.arange(L)[:, None])
    return m


def build_le(lengths, L, causal=False):
    keys = np.arange(L) <= np.asarray(lengths)[:, None]
    m = np.broadcast_to(keys[:, None, None, :], (len(lengths), 1, L, L))
    if causal:
        m = m & np.tril(np.ones((L, L), dtype=bool))
    return np.array(m)


def build_sorts_in_place(lengths, L, causal=False):
    """Right mask, but sorts the caller's lengths (e.g. to bucket the batch) along the way."""
    m = build_loops(lengths, L, causal)
    lengths.sort()
    return m


def build_float(lengths, L, causal=False):
    return build_loops(lengths, L, causal).astype(np.float64)


WRONG = {
    CAUSAL: [
        ("causal-upper-triangle", causal_upper),
        ("causal-upper-triangle", causal_future_true),
        ("causal-diagonal-excluded", causal_strict),
        ("mask-integers-not-booleans", causal_int),
        ("mask-integers-not-booleans", causal_float),
    ],
    PADDING: [
        ("padding-less-equal", padding_le),
        ("mask-integers-not-booleans", padding_int),
        ("mask-transposed", padding_transposed),
        ("input-modified-in-place", padding_in_place),
    ],
    BUILD: [
        ("mask-missing-head-axis", build_no_head_axis),
        ("padding-blocks-queries", build_blocks_queries),
        ("padding-blocks-queries", build_blocks_both),
        ("mask-transposed", build_transposed),
        ("causal-ignored", build_never_causal),
        ("causal-ignored", build_always_causal),
        ("causal-upper-triangle", build_upper),
        ("causal-diagonal-excluded", build_strict),
        ("padding-less-equal", build_le),
        ("mask-integers-not-booleans", build_float),
        ("input-modified-in-place", build_sorts_in_place),
    ],
}

def _wrong_params():
    params = []
    for ex_id, pairs in WRONG.items():
        for mid, fn in pairs:
            params.append(pytest.param(ex_id, mid, fn, id=f"{ex_id}/{mid}/{fn.__name__}"))
    return params


def _outcomes(ex, fn, seed):
    cases = ex.cases(seed)
    return cases, [call(fn, c, len(ex.outputs)) for c in cases]


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize(
    "exercise_id, mid, fn",
    [pytest.param(e, m, f, id=f"{e}/{m}/{f.__name__}") for e, pairs in WRONG.items() for m, f in pairs],
)
def test_wrong_is_rejected_and_diagnosed(exercise_id, mid, fn, seed):
    """Without the judge's value comparison: the output differs from the reference on some
    case (or modifies an input), and the misconception matcher names the right id."""
    ex = exercises.get(exercise_id)
    cases, got = _outcomes(ex, fn, seed)
    _, want = _outcomes(ex, ex.reference, seed)

    def same(g, w):
        a, b = g.outputs[0], w.outputs[0]
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b) and not g.modified

    assert not all(same(g, w) for g, w in zip(got, want)), "this wrong implementation passes"
    if mid == "input-modified-in-place":
        assert any(g.modified for g in got)
    else:
        assert diagnose(ex, cases, got) == mid


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("exercise_id, mid, fn", _wrong_params())
def test_wrong_is_named_by_check(exercise_id, mid, fn, seed):
    v = evaluate(fn, exercise_id, seed=seed)
    shown = format_verdict(v)
    assert v.status == "failed", shown
    assert v.misconception == mid, shown
    assert f"[{mid}]" in shown


def test_every_registered_misconception_is_exercised():
    for ex_id, pairs in WRONG.items():
        registered = {m.id for m in exercises.get(ex_id).misconceptions}
        assert registered <= {mid for mid, _ in pairs}, registered - {mid for mid, _ in pairs}


@pytest.mark.parametrize("fn, exercise_id", [(causal_int, CAUSAL), (causal_float, CAUSAL),
                                             (padding_int, PADDING), (build_float, BUILD)])
def test_numbers_instead_of_booleans_get_dtype_and_name(fn, exercise_id):
    v = evaluate(fn, exercise_id)
    shown = " ".join(format_verdict(v).split())  # as read, whatever the line wrapping
    assert "expected bool" in shown and "dtype" in shown
    assert v.misconception == "mask-integers-not-booleans"
    assert "[mask-integers-not-booleans]" in shown


# ============================================================================================
# Not implemented, errors, check() output
# ============================================================================================


def _todo(*args, **kwargs):
    raise NotImplementedError


@pytest.mark.parametrize("exercise_id", [CAUSAL, PADDING, BUILD])
def test_not_implemented(exercise_id):
    v = evaluate(_todo, exercise_id)
    assert (v.status, v.misconception) == ("not_implemented", None)
    assert format_verdict(v).startswith(f"⏳ {exercise_id}: not implemented yet")


def test_unrelated_error_is_an_error():
    def padding_mask(lengths, L):
        cache = {}
        return cache[L]  # KeyError, not a known mistake

    v = evaluate(padding_mask, PADDING)
    assert (v.status, v.misconception) == ("error", None)
    assert "KeyError" in v.feedback
    assert format_verdict(v).startswith(f"❌ {PADDING}: raised an error")


def test_lists_are_not_arrays():
    v = evaluate(lambda L: causal_loops(L).tolist(), CAUSAL)
    assert (v.status, v.misconception) == ("failed", None)
    assert "expected a NumPy array" in v.feedback


@pytest.mark.parametrize("fn", [ref.causal_mask, ref.padding_mask, ref.build_attention_mask])
def test_check_prints_passed(capsys, fn):
    check(fn)
    out = capsys.readouterr().out
    assert out.startswith(f"✅ 03.{fn.__name__}: passed") and out.count("\n") == 1


def test_check_prints_the_dtype_and_the_mistake(capsys):
    check(causal_int, CAUSAL)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ {CAUSAL}: not yet right")
    assert "has dtype int32; expected bool" in out
    assert "Likely mistake [mask-integers-not-booleans]" in out


def test_check_prints_the_missing_head_axis(capsys):
    check(build_no_head_axis, BUILD)
    out = capsys.readouterr().out
    assert "has shape (3, 4, 4); expected (3, 1, 4, 4)" in " ".join(out.split())
    assert "[mask-missing-head-axis]" in out and "(B, 1, L, L)" in out


def test_check_prints_the_transposed_padding(capsys):
    check(padding_transposed, PADDING)
    out = " ".join(capsys.readouterr().out.split())
    assert "has shape (4, 3); expected (3, 4)" in out and "[mask-transposed]" in out


def test_check_prints_a_hint_for_an_unknown_bool_mistake(capsys):
    def causal_mask(L):
        m = np.tril(np.ones((L, L), dtype=bool))
        m[-1, 0] = L < 3  # an odd slip in the last row only
        return m

    check(causal_mask)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ {CAUSAL}: not yet right")
    assert "row i should allow exactly i+1 keys" in out
