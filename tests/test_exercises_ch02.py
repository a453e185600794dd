"""The chapter-02 check is discriminating: right code passes, each known mistake is named.

Every learner-style function below is written independently of the misconception variants in
``mhsa_ref/exercises/ch02.py`` (none are imported) and in other styles: Python loops with a
Kronecker delta, ``np.einsum``, ``np.diagflat``, broadcasting with ``[:, None]``. When the
judge names one of them correctly it has matched *behaviour*, not code.

Sections:
1. correct implementations pass under several seeds;
2. each wrong implementation fails and is named with the right misconception id;
3. not implemented, the ``@exercise`` fallback, errors and malformed outputs;
4. what ``check`` prints.
"""

from __future__ import annotations

import numpy as np
import pytest

from mhsa_ref import attention as ref
from mhsa_ref import exercises
from mhsa_ref.checks import check, evaluate, exercise, format_verdict

JACOBIAN = "02.softmax_jacobian"
SEEDS = (0, 1, 2, 12345)


# ============================================================================================
# Learner-style implementations
# ============================================================================================

# --- correct -------------------------------------------------------------------------------


def jacobian_loops(p):
    """Straight from dp_i/dx_j = p_i (delta_ij - p_j), one entry at a time."""
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            J[i, j] = p[i] * (delta - p[j])
    return J


def jacobian_broadcast(p):
    """p_i times (I - 1 p^T), row by row through broadcasting."""
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[None, :])


def jacobian_einsum(p):
    """diag(p) and p p^T, both with einsum."""
    eye = np.eye(p.size)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jacobian_diagflat_fill(p):
    """Off-diagonal -p_i p_j first, then overwrite the diagonal with p_i (1 - p_i)."""
    J = -np.multiply.outer(p, p)
    np.fill_diagonal(J, p - p**2)
    return J


CORRECT = [ref.softmax_jacobian, jacobian_loops, jacobian_broadcast, jacobian_einsum, jacobian_diagflat_fill]

# --- wrong: each has exactly one mistake ---------------------------------------------------


def only_diagonal_loop(p):
    """Thinks p_i depends only on x_i: fills dp_i/dx_i = p_i (1 - p_i) and nothing else."""
    J = np.zeros((len(p), len(p)))
    for i in range(len(p)):
        J[i, i] = p[i] - p[i] ** 2
    return J


def only_diagonal_diagflat(p):
    """diag(p) alone: forgot the whole p p^T term."""
    return np.diagflat(p)


def sign_flipped(p):
    return p[:, None] * p[None, :] - np.diagflat(p)


def identity_minus_outer_loops(p):
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = (1.0 if i == j else 0.0) - p[i] * p[j]
    return J


def outer_only_einsum(p):
    return -np.einsum("a,b->ab", p, p)


def dot_instead_of_outer(p):
    """p.T does nothing to a 1-D array, so np.dot(p, p.T) is a number, not a matrix."""
    return np.diagflat(p) - np.dot(p, p.T)


def squares_broadcast(p):
    return np.diagflat(p) - p**2


def log_softmax_loops(p):
    """delta_ij - p_j: the derivative of log p_i, not of p_i."""
    n = len(p)
    return np.array([[(i == j) - p[j] for j in range(n)] for i in range(n)], dtype=float)


def jacobian_float32(p):
    p32 = p.astype(np.float32)
    return np.diag(p32) - np.outer(p32, p32)


def jacobian_in_place(p):
    """Right answer, but reuses the caller's array to hold the diagonal."""
    off = -np.outer(p, p)
    np.fill_diagonal(off, 0.0)
    p *= 1 - p  # p_i (1 - p_i), written into p itself
    return off + np.diag(p)


WRONG = [
    ("jacobian-diagonal-only", only_diagonal_loop),
    ("jacobian-diagonal-only", only_diagonal_diagflat),
    ("jacobian-sign-flipped", sign_flipped),
    ("jacobian-identity-minus-outer", identity_minus_outer_loops),
    ("jacobian-outer-only", outer_only_einsum),
    ("jacobian-not-outer-product", dot_instead_of_outer),
    ("jacobian-not-outer-product", squares_broadcast),
    ("jacobian-log-softmax", log_softmax_loops),
    ("float32-output", jacobian_float32),
    ("input-modified-in-place", jacobian_in_place),
]


# ============================================================================================
# 1. Correct implementations pass, under every seed
# ============================================================================================


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fn", CORRECT, ids=lambda f: f.__name__)
def test_correct_jacobian_passes(fn, seed):
    v = evaluate(fn, JACOBIAN, seed=seed)
    assert (v.status, v.misconception) == ("passed", None), format_verdict(v)


def test_cases_cover_the_edges_that_separate_the_mistakes():
    ps = [case.args[0] for case in exercises.get(JACOBIAN).cases(0)]
    assert any(p.size == 1 for p in ps), "n = 1"
    assert any(np.array_equal(p, np.eye(p.size)[np.argmax(p)]) for p in ps), "an exactly one-hot p"
    assert any(np.allclose(p, 1 / p.size) and p.size > 2 for p in ps), "a uniform p"
    assert any(0 < p.max() < 1 and p.max() > 1 - 1e-3 for p in ps), "a saturated p from huge logits"
    for p in ps:
        assert p.ndim == 1 and np.isclose(p.sum(), 1.0) and (p >= 0).all()


# ============================================================================================
# 2. Each wrong implementation fails with the right misconception named
# ============================================================================================


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("mid, fn", [pytest.param(m, f, id=f"{m}/{f.__name__}") for m, f in WRONG])
def test_wrong_jacobian_is_named(mid, fn, seed):
    v = evaluate(fn, JACOBIAN, seed=seed)
    shown = format_verdict(v)
    assert v.status == "failed", shown
    assert v.misconception == mid, shown
    assert f"[{mid}]" in shown


def test_every_registered_misconception_is_exercised():
    covered = {mid for mid, _ in WRONG}
    registered = {m.id for m in exercises.get(JACOBIAN).misconceptions}
    assert registered == covered, registered ^ covered


def test_unknown_mistake_gets_property_hints():
    def half_jacobian(p):  # right shape and signs, every entry halved
        return 0.5 * (np.diag(p) - np.outer(p, p))

    v = evaluate(half_jacobian, JACOBIAN)
    assert (v.status, v.misconception) == ("failed", None)
    assert "p_i (1 - p_i)" in v.feedback  # the diagonal hint

    def upper_only(p):  # not symmetric, columns do not sum to zero
        return np.triu(np.diag(p) - np.outer(p, p))

    v = evaluate(upper_only, JACOBIAN)
    assert (v.status, v.misconception) == ("failed", None)
    assert "symmetric" in v.feedback and "sum to 0" in v.feedback


# ============================================================================================
# 3. Not implemented, the fallback, errors and malformed outputs
# ============================================================================================


def test_not_implemented_and_fallback(capsys):
    @exercise
    def softmax_jacobian(p):
        raise NotImplementedError("your code here")

    p = np.array([0.5, 0.25, 0.25])
    np.testing.assert_array_equal(softmax_jacobian(p), ref.softmax_jacobian(p))
    softmax_jacobian(p)
    assert capsys.readouterr().out.count("note: softmax_jacobian is not implemented yet") == 1
    v = evaluate(softmax_jacobian)
    assert (v.exercise, v.status) == (JACOBIAN, "not_implemented")


def test_unrelated_exception_is_an_error():
    def buggy(p):
        return np.zeros((len(p), len(p))) + {"p": p}["q"]

    v = evaluate(buggy, JACOBIAN)
    assert (v.status, v.misconception) == ("error", None)
    assert "KeyError" in v.feedback


@pytest.mark.parametrize(
    "make",
    [
        lambda p: ref.softmax_jacobian(p).tolist(),  # a list, not an array
        lambda p: ref.softmax_jacobian(p)[None],  # an extra axis
        lambda p: ref.softmax_jacobian(p).ravel(),  # flattened
        lambda p: (ref.softmax_jacobian(p),),  # a 1-tuple
        lambda p: ref.softmax_jacobian(p).astype(object),
    ],
    ids=["list", "extra-axis", "flat", "one-tuple", "object"],
)
def test_malformed_output_fails_without_a_misconception(make):
    v = evaluate(make, JACOBIAN)
    assert (v.status, v.misconception) == ("failed", None), format_verdict(v)


# ============================================================================================
# 4. What check() prints
# ============================================================================================


def test_check_prints_passed(capsys):
    check(ref.softmax_jacobian)
    out = capsys.readouterr().out
    assert out.startswith(f"✅ {JACOBIAN}: passed")
    assert out.count("\n") == 1


@pytest.mark.parametrize("mid, fn", [pytest.param(m, f, id=m) for m, f in WRONG[:8]])
def test_check_names_the_mistake_and_the_fix(capsys, mid, fn):
    check(fn, JACOBIAN)
    out = capsys.readouterr().out
    assert out.startswith(f"❌ {JACOBIAN}: not yet right")
    assert f"Likely mistake [{mid}]" in out
    assert "np.outer(p, p)" in out or "diag(p) - p p^T" in out  # the fix is shown
    assert "On case '" in out  # and the case it went wrong on


def test_check_not_implemented_line(capsys):
    def softmax_jacobian(p):
        raise NotImplementedError

    check(softmax_jacobian)
    assert capsys.readouterr().out.startswith(f"⏳ {JACOBIAN}: not implemented yet")
