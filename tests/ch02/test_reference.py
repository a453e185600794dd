"""Tests for the chapter-02 reference maths: ``mhsa_ref.chapters.ch02.reference.softmax_jacobian``.

Evidence independent of the code under test:

1. PyTorch's autograd as an oracle: ``torch.autograd.functional.jacobian`` of
   ``torch.softmax`` at x, compared with ``softmax_jacobian(softmax(x))``.
2. Central finite differences of softmax (no derivative formula involved).
3. Hypothesis properties any softmax Jacobian has: symmetric, rows and columns sum to 0,
   positive semi-definite, diagonal p(1 - p) in [0, 1/4], eigenvalues in [0, max p].
4. Errors name the argument and its shape; inputs are never modified; float64 out.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import hypothesis.extra.numpy as hnp
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch01.reference import softmax
from mhsa_ref.chapters.ch02.reference import softmax_jacobian, tempered_softmax_jacobian

PROPS = settings(max_examples=60, deadline=None)


def torch_jacobian(x: np.ndarray) -> np.ndarray:
    """d softmax(x) / dx from autograd, float64."""
    t = torch.from_numpy(np.array(x, dtype=np.float64, copy=True))
    return torch.autograd.functional.jacobian(lambda v: torch.softmax(v, dim=0), t).numpy()


def finite_difference_jacobian(x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Column j = (softmax(x + h e_j) - softmax(x - h e_j)) / 2h."""
    n = x.size
    J = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        J[:, j] = (softmax(x + e) - softmax(x - e)) / (2 * h)
    return J


logits = hnp.arrays(
    np.float64,
    st.integers(1, 8),
    elements=st.floats(-30, 30, allow_nan=False, allow_infinity=False),
)
distributions = logits.map(softmax)


# --------------------------------------------------------------------------------------------
# 1. PyTorch autograd as oracle
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        [1.0, 2.0, 3.0],
        [0.0],
        [0.0, 0.0, 0.0, 0.0],
        [5.0, -5.0],
        [1000.0, 990.0, 0.0],  # saturated: the Jacobian is nearly zero, still exact
        np.linspace(-3, 3, 9),
    ],
    ids=["three", "n=1", "uniform", "two", "huge", "nine"],
)
def test_matches_torch_autograd(x):
    x = np.asarray(x, dtype=np.float64)
    J = softmax_jacobian(softmax(x))
    np.testing.assert_allclose(J, torch_jacobian(x), rtol=1e-10, atol=1e-15)


@PROPS
@given(logits)
def test_property_matches_torch_autograd(x):
    np.testing.assert_allclose(softmax_jacobian(softmax(x)), torch_jacobian(x), rtol=1e-9, atol=1e-14)


@PROPS
@given(hnp.arrays(np.float64, st.integers(1, 6), elements=st.floats(-5, 5)))
def test_property_matches_finite_differences(x):
    np.testing.assert_allclose(softmax_jacobian(softmax(x)), finite_difference_jacobian(x), rtol=0, atol=1e-8)


def test_exact_values_for_two_outputs():
    # p = (a, b): J = [[ab, -ab], [-ab, ab]] since a(1 - a) = ab when a + b = 1.
    J = softmax_jacobian([0.25, 0.75])
    np.testing.assert_array_equal(J, [[0.1875, -0.1875], [-0.1875, 0.1875]])
    np.testing.assert_array_equal(softmax_jacobian([0.0, 1.0, 0.0]), np.zeros((3, 3)))
    np.testing.assert_array_equal(softmax_jacobian([1.0]), [[0.0]])


# --------------------------------------------------------------------------------------------
# 2. Properties
# --------------------------------------------------------------------------------------------


@PROPS
@given(distributions)
def test_property_symmetric_zero_sums_psd(p):
    J = softmax_jacobian(p)
    n = p.size
    assert J.shape == (n, n) and J.dtype == np.float64
    np.testing.assert_array_equal(J, J.T)
    np.testing.assert_allclose(J @ np.ones(n), 0.0, atol=1e-15)  # rows: shift invariance
    np.testing.assert_allclose(np.ones(n) @ J, 0.0, atol=1e-15)  # columns: outputs sum to 1
    eig = np.linalg.eigvalsh(J)
    assert eig.min() >= -1e-15  # positive semi-definite
    assert eig.max() <= p.max() + 1e-15  # diag(p) - p p^T <= diag(p)
    assert np.all((np.diag(J) >= 0) & (np.diag(J) <= 0.25))


@PROPS
@given(distributions, hnp.arrays(np.float64, 8, elements=st.floats(-10, 10)))
def test_property_quadratic_form_is_a_variance(p, v):
    """v^T J v = sum p_i v_i^2 - (sum p_i v_i)^2: the variance of v under p."""
    v = v[: p.size]
    mean = p @ v
    np.testing.assert_allclose(v @ softmax_jacobian(p) @ v, p @ (v - mean) ** 2, rtol=1e-9, atol=1e-12)


def test_norm_collapses_as_logits_grow():
    """The chapter's claim: scaling the logits up drives the Jacobian to zero."""
    x = np.array([1.0, 0.5, -0.3, 0.2])
    norms = [np.linalg.norm(softmax_jacobian(softmax(t * x))) for t in (1, 4, 16, 64)]
    assert norms == sorted(norms, reverse=True)
    assert norms[-1] < 1e-10 < norms[0]


# --------------------------------------------------------------------------------------------
# 3. Inputs, dtypes and errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_float64_out_and_input_untouched(dtype):
    p = np.array([1, 0, 0], dtype=dtype) if dtype == np.int64 else np.array([0.5, 0.25, 0.25], dtype=dtype)
    before = p.copy()
    J = softmax_jacobian(p)
    assert J.dtype == np.float64
    np.testing.assert_array_equal(p, before)
    assert p.dtype == before.dtype
    np.testing.assert_array_equal(J, softmax_jacobian(p.astype(np.float64)))
    assert not np.shares_memory(J, p)


@PROPS
@given(distributions)
def test_property_input_not_modified(p):
    before = p.copy()
    softmax_jacobian(p)
    np.testing.assert_array_equal(p, before)


@pytest.mark.parametrize(
    "p, shape",
    [(np.zeros((2, 3)), "(2, 3)"), (np.float64(1.0), "()"), (np.ones((1, 1, 4)), "(1, 1, 4)")],
    ids=["2-D", "0-D", "3-D"],
)
def test_not_1d_raises_value_error_naming_p_and_shape(p, shape):
    with pytest.raises(ValueError, match=r"^p must be 1-D.*" + re.escape(shape)):
        softmax_jacobian(p)


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.ones(3, dtype=complex), np.ones(2, dtype=bool), [[1.0], [1.0, 2.0]]])
def test_non_numeric_raises_type_error_naming_p(bad):
    with pytest.raises(TypeError, match=r"^p "):
        softmax_jacobian(bad)


# ---------------------------------------------------------------------------------------------
# 02.tempered_softmax_jacobian (stretch)


def torch_tempered_jacobian(x: np.ndarray, T: float) -> np.ndarray:
    t = torch.from_numpy(np.array(x, dtype=np.float64, copy=True))
    return torch.autograd.functional.jacobian(lambda v: torch.softmax(v / T, dim=0), t).numpy()


@PROPS
@given(hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(-30, 30)),
       st.floats(0.05, 20.0))
def test_tempered_jacobian_matches_torch_autograd(x, T):
    np.testing.assert_allclose(tempered_softmax_jacobian(x, T), torch_tempered_jacobian(x, T),
                               rtol=1e-9, atol=1e-12)


@PROPS
@given(hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(-5, 5)), st.floats(0.2, 5.0))
def test_tempered_jacobian_properties(x, T):
    """J(p)/T at p = softmax(x/T): symmetric, rows sum to 0, PSD, diagonal in [0, 1/(4T)];
    T = 1 is the plain Jacobian."""
    J = tempered_softmax_jacobian(x, T)
    np.testing.assert_allclose(J, J.T, atol=1e-15)
    np.testing.assert_allclose(J.sum(axis=1), 0.0, atol=1e-12)
    assert np.linalg.eigvalsh(J).min() > -1e-12
    assert (np.diag(J) >= 0).all() and (np.diag(J) <= 0.25 / T + 1e-12).all()
    np.testing.assert_allclose(tempered_softmax_jacobian(x, 1.0), softmax_jacobian(softmax(x)), atol=1e-15)


def test_tempered_jacobian_huge_logits_small_temperature_are_finite():
    J = tempered_softmax_jacobian(np.array([1000.0, 990.0, 0.0]), 0.5)
    assert np.isfinite(J).all()
    np.testing.assert_allclose(J, torch_tempered_jacobian(np.array([1000.0, 990.0, 0.0]), 0.5), atol=1e-12)


@pytest.mark.parametrize("x, T, exc, pattern", [
    (np.ones((2, 3)), 1.0, ValueError, r"x must be 1-D.*\(2, 3\)"),
    (np.ones(3), 0.0, ValueError, r"T must be a positive"),
    (np.ones(3), -2.0, ValueError, r"T=-2.0"),
    (np.ones(3), float("inf"), ValueError, r"T must be a positive finite"),
    (np.ones(3), "2", TypeError, r"T must be a positive number"),
    (np.ones(3), True, TypeError, r"T must be a positive number"),
])
def test_tempered_jacobian_bad_arguments_are_named(x, T, exc, pattern):
    with pytest.raises(exc, match=pattern):
        tempered_softmax_jacobian(x, T)


def test_tempered_jacobian_does_not_modify_x():
    x = np.array([1.0, -2.0, 3.0])
    tempered_softmax_jacobian(x, 3.0)
    np.testing.assert_array_equal(x, [1.0, -2.0, 3.0])
