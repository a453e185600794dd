"""Tests for the chapter-09 reference code: ``reference.linear_cka`` and
``reference_torch.orthogonality_penalty``.

Evidence independent of the code under test:

1. CKA against other formulas: HSIC with the centring matrix H on the (n, n) Gram matrices
   (Kornblith et al. 2019, eq. 3-4), and the squared Pearson correlation for one feature each.
2. Hypothesis properties of CKA: symmetric, in [0, 1], 1 for X against itself, invariant to
   orthogonal maps, isotropic scaling and translation of either side; not to a general
   invertible map.
3. The penalty against ||W Wᵀ||_F² minus its diagonal blocks, halved; zero for heads whose rows
   lie in orthogonal subspaces; its gradient against the closed form 2 (W Wᵀ)_off W and
   ``torch.autograd.gradcheck`` in float64; invariances (rotations inside a head, of the input).
4. Validation: bad arguments raise errors naming the argument and its shape; inputs are never
   modified; float32 stays float32.
5. The stretch's attention entropy against ``torch.distributions.Categorical`` on the rows that
   attend somewhere, and its properties: 0 for one-hot rows, log L for uniform ones, blind to
   the order of the keys and to masked rows added or removed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch09.reference import linear_cka
from mhsa_ref.chapters.ch09.reference_torch import attention_entropy, orthogonality_penalty


def features(seed, n, p, offset=2.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)) * rng.uniform(0.2, 3.0, size=p) + offset * rng.normal(size=p)


def orthogonal(seed, p):
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(p, p)))
    return q * np.sign(np.diag(r))


def hsic_cka(X, Y):
    """Gram matrices centred by H = I - 11ᵀ/n, HSIC = tr(K H L H) / (n - 1)²."""
    n = X.shape[0]
    H = np.eye(n) - 1.0 / n
    K, L = X @ X.T, Y @ Y.T
    hsic = lambda A, B: np.trace(A @ H @ B @ H) / (n - 1) ** 2  # noqa: E731
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


# --------------------------------------------------------------------------------------------
# 1. CKA oracles
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, p1, p2", [(20, 5, 3), (6, 10, 4), (50, 1, 7), (9, 9, 9), (3, 2, 2)])
def test_cka_equals_hsic_with_the_centring_matrix(n, p1, p2):
    X, Y = features(n, n, p1), features(n + 1, n, p2)
    Y = Y + X[:, :1]  # related, so the value is not near 0
    assert linear_cka(X, Y) == pytest.approx(hsic_cka(X, Y), rel=1e-10)


def test_cka_of_one_feature_each_is_the_squared_correlation():
    x = features(1, 40, 1)
    y = 0.7 * x + features(2, 40, 1)
    r = np.corrcoef(x[:, 0], y[:, 0])[0, 1]
    assert linear_cka(x, y) == pytest.approx(r ** 2, rel=1e-10)


# --------------------------------------------------------------------------------------------
# 2. CKA properties
# --------------------------------------------------------------------------------------------

shapes = dict(n=st.integers(3, 25), p1=st.integers(1, 8), p2=st.integers(1, 8), seed=st.integers(0, 10_000))


@settings(max_examples=60, deadline=None)
@given(**shapes)
def test_cka_is_symmetric_in_0_1_and_1_against_itself(n, p1, p2, seed):
    X, Y = features(seed, n, p1), features(seed + 1, n, p2)
    value = linear_cka(X, Y)
    assert isinstance(value, float) and 0.0 <= value <= 1.0
    assert linear_cka(Y, X) == pytest.approx(value, rel=1e-9, abs=1e-12)
    assert linear_cka(X, X) == pytest.approx(1.0, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(**shapes, scale=st.floats(1e-3, 1e3), shift=st.floats(-100, 100))
def test_cka_is_invariant_to_orthogonal_maps_isotropic_scaling_and_translation(n, p1, p2, seed, scale, shift):
    X, Y = features(seed, n, p1), features(seed + 1, n, p2) + 0.5 * features(seed, n, p1)[:, :1]
    moved = scale * X @ orthogonal(seed, p1) + shift * np.arange(1, p1 + 1)
    assert linear_cka(moved, Y) == pytest.approx(linear_cka(X, Y), rel=1e-7, abs=1e-10)
    assert linear_cka(moved, X) == pytest.approx(1.0, rel=1e-9)


def test_cka_is_not_invariant_to_a_general_invertible_map():
    X, Y = features(3, 30, 4), features(4, 30, 4)
    Y = Y + X  # related
    A = np.diag([10.0, 1.0, 0.1, 1.0]) + 0.3 * np.random.default_rng(5).normal(size=(4, 4))
    assert abs(np.linalg.det(A)) > 1e-3
    assert abs(linear_cka(X @ A, Y) - linear_cka(X, Y)) > 0.05
    assert linear_cka(X @ A, X) < 0.99  # even against X itself


def test_cka_accepts_array_likes_and_cpu_tensors():
    X, Y = features(6, 10, 3), features(7, 10, 2)
    assert linear_cka(X.tolist(), torch.from_numpy(Y)) == pytest.approx(linear_cka(X, Y), rel=1e-12)


# --------------------------------------------------------------------------------------------
# 3. The penalty
# --------------------------------------------------------------------------------------------


def off_diagonal_blocks(W, num_heads):
    d_h = W.shape[0] // num_heads
    G = W @ W.T
    same = np.kron(np.eye(num_heads), np.ones((d_h, d_h))).astype(bool)
    return np.where(same, 0.0, G)


penalty_shapes = dict(h=st.integers(1, 6), d_h=st.integers(1, 5), seed=st.integers(0, 10_000))


@settings(max_examples=60, deadline=None)
@given(**penalty_shapes)
def test_penalty_is_half_the_off_diagonal_blocks_of_w_wt_and_its_gradient_their_closed_form(h, d_h, seed):
    W = np.random.default_rng(seed).normal(size=(h * d_h, h * d_h))
    Wt = torch.tensor(W, requires_grad=True)
    value = orthogonality_penalty(Wt, h)
    off = off_diagonal_blocks(W, h)
    assert value.item() == pytest.approx((off ** 2).sum() / 2, rel=1e-10, abs=1e-12)
    value.backward()
    # P = ½ Σ_off G_ij², G = W Wᵀ symmetric: dP/dW = 2 G_off W
    np.testing.assert_allclose(Wt.grad.numpy(), 2 * off @ W, rtol=1e-9, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(**penalty_shapes)
def test_penalty_is_zero_for_heads_in_orthogonal_subspaces(h, d_h, seed):
    d = h * d_h
    Q = orthogonal(seed, d)  # its rows: an orthonormal basis, shared out among the heads
    rng = np.random.default_rng(seed + 1)
    rows = [rng.normal(size=(d_h, d_h)) @ Q[i * d_h:(i + 1) * d_h] for i in range(h)]
    W = torch.tensor(np.concatenate(rows))
    assert orthogonality_penalty(W, h).item() == pytest.approx(0.0, abs=1e-20 + 1e-12 * (W ** 2).sum().item() ** 2)
    # ... and far from zero once the subspaces overlap
    if h > 1:
        W[d_h] = W[0]
        assert orthogonality_penalty(W, h).item() > 1e-3 * ((W[0] ** 2).sum().item()) ** 2


@settings(max_examples=30, deadline=None)
@given(**penalty_shapes)
def test_penalty_is_invariant_to_rotations_inside_a_head_and_of_the_input(h, d_h, seed):
    d = h * d_h
    W = torch.tensor(np.random.default_rng(seed).normal(size=(d, d)))
    R = torch.block_diag(*[torch.tensor(orthogonal(seed + i, d_h)) for i in range(h)])  # one rotation per head
    Q = torch.tensor(orthogonal(seed + h, d))
    base = orthogonality_penalty(W, h).item()
    assert orthogonality_penalty(R @ W, h).item() == pytest.approx(base, rel=1e-9, abs=1e-12)
    assert orthogonality_penalty(W @ Q, h).item() == pytest.approx(base, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("h, d_h", [(2, 3), (3, 2), (4, 1), (1, 4)])
def test_penalty_gradcheck_float64(h, d_h):
    W = torch.randn(h * d_h, h * d_h, dtype=torch.float64, generator=torch.Generator().manual_seed(h),
                    requires_grad=True)
    assert torch.autograd.gradcheck(lambda w: orthogonality_penalty(w, h), (W,))
    assert torch.autograd.gradgradcheck(lambda w: orthogonality_penalty(w, h), (W,))


def test_penalty_keeps_float32_is_0d_and_differentiable_with_one_head():
    W = torch.randn(8, 8, requires_grad=True)
    for h in (1, 2, 8):
        value = orthogonality_penalty(W, h)
        assert value.shape == () and value.dtype == torch.float32 and value.requires_grad
    assert orthogonality_penalty(W, 1).item() == 0.0


def test_penalty_works_on_a_linear_layers_weight_and_numpy_ints():
    assert orthogonality_penalty(torch.eye(4), np.int64(2)).item() == 0.0
    layer = torch.nn.Linear(12, 12)
    orthogonality_penalty(layer.weight, 3).backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0


# --------------------------------------------------------------------------------------------
# 4. Validation
# --------------------------------------------------------------------------------------------


def test_cka_inputs_are_not_modified():
    X, Y = features(1, 12, 3), features(2, 12, 5)
    X0, Y0 = X.copy(), Y.copy()
    linear_cka(X, Y)
    assert np.array_equal(X, X0) and np.array_equal(Y, Y0)


@pytest.mark.parametrize("X, Y, words", [
    (np.arange(10.0).reshape(5, 2), np.arange(12.0).reshape(6, 2), r"X \(5, 2\) and Y \(6, 2\)"),
    (np.arange(5.0), np.ones((5, 2)), r"X must be a 2-D array .* shape \(5,\)"),
    (np.ones((4, 3)), np.arange(8.0).reshape(4, 2), r"X \(4, 3\) is the same for every example"),
    (np.arange(8.0).reshape(4, 2), np.full((4, 2), np.nan), "Y holds NaN"),
    (np.ones((1, 3)), np.ones((1, 3)), r"X needs at least 2 examples .* shape \(1, 3\)"),
])
def test_cka_bad_input_is_named(X, Y, words):
    with pytest.raises(ValueError, match=words):
        linear_cka(X, Y)


def test_penalty_input_is_not_modified():
    W = torch.randn(6, 6)
    before = W.clone()
    orthogonality_penalty(W, 3)
    assert torch.equal(W, before)


@pytest.mark.parametrize("W, h, error, words", [
    (torch.ones(4, 6), 2, ValueError, r"square .* shape \(4, 6\)"),
    (torch.ones(6, 6), 4, ValueError, "d_model=6 .* not divisible by num_heads=4"),
    (torch.ones(6, 6), 0, ValueError, "num_heads must be a positive int, got 0"),
    (torch.ones(6, 6), 2.0, ValueError, "num_heads must be a positive int, got 2.0"),
    (torch.ones(6, 6, dtype=torch.long), 2, ValueError, "floating-point"),
    (np.ones((6, 6)), 2, TypeError, "W must be a torch.Tensor, got ndarray"),
])
def test_penalty_bad_input_is_named(W, h, error, words):
    with pytest.raises(error, match=words):
        orthogonality_penalty(W, h)


# --------------------------------------------------------------------------------------------
# 5. attention_entropy (stretch)
# --------------------------------------------------------------------------------------------


def attention_weights(seed, B, h, L, lengths=None, causal=False, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    allowed = torch.ones(B, 1, L, L, dtype=torch.bool)
    if causal:
        allowed &= torch.ones(L, L, dtype=torch.bool).tril()
    if lengths is not None:
        valid = torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]
        allowed &= valid[:, None, :, None] & valid[:, None, None, :]
    s = torch.randn(B, h, L, L, generator=g, dtype=dtype).masked_fill(~allowed, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, dim=-1))  # a query with no key: an all-zero row


entropy_shapes = dict(B=st.integers(1, 3), h=st.integers(1, 4), L=st.integers(1, 7), causal=st.booleans(),
                      seed=st.integers(0, 10_000), data=st.data())


@settings(max_examples=60, deadline=None)
@given(**entropy_shapes)
def test_entropy_equals_categoricals_over_the_rows_that_attend(B, h, L, causal, seed, data):
    lengths = [L] + data.draw(st.lists(st.integers(0, L), min_size=B - 1, max_size=B - 1))
    w = attention_weights(seed, B, h, L, lengths, causal)
    got = attention_entropy(w)
    for head in range(h):
        rows = w[:, head].reshape(-1, L)
        rows = rows[rows.sum(-1) > 0]
        expected = torch.distributions.Categorical(probs=rows).entropy().mean()
        assert got[head].item() == pytest.approx(expected.item(), rel=1e-9, abs=1e-12)
        assert 0.0 <= got[head].item() <= np.log(L) + 1e-12
    # blind to the order of the keys (the same permutation in every row) and to masked rows
    perm = torch.randperm(L, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(attention_entropy(w[..., perm]), got, rtol=1e-12, atol=1e-12)
    padded = torch.cat([w, torch.zeros(B, h, 2, L, dtype=w.dtype)], dim=2)  # two more queries, masked
    torch.testing.assert_close(attention_entropy(padded), got, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("L", [1, 2, 5, 64])
def test_entropy_of_one_hot_rows_is_0_and_of_uniform_rows_log_L(L):
    one_hot = torch.eye(L).roll(1, dims=1).expand(2, 1, L, L)
    uniform = torch.full((2, 1, L, L), 1.0 / L, dtype=torch.float64)
    assert attention_entropy(one_hot).item() == 0.0
    assert attention_entropy(uniform).item() == pytest.approx(np.log(L), rel=1e-12, abs=1e-15)


def test_entropy_keeps_float32_leaves_its_input_and_gives_nan_to_a_head_without_rows():
    w = attention_weights(0, 2, 3, 5, causal=True, dtype=torch.float32)
    before = w.clone()
    out = attention_entropy(w)
    assert out.dtype == torch.float32 and out.shape == (3,) and torch.equal(w, before)
    w[:, 1] = 0.0  # every query of head 1 masked
    out = attention_entropy(w)
    assert torch.isnan(out[1]) and torch.isfinite(out[[0, 2]]).all()


@pytest.mark.parametrize("w, error, words", [
    (torch.ones(2, 4, 4), ValueError, r"\(B, h, L, L\), got torch.float32 of shape \(2, 4, 4\)"),
    (torch.ones(1, 2, 4, 4, dtype=torch.long), ValueError, "floating-point"),
    (np.ones((1, 2, 4, 4)), TypeError, "weights must be a torch.Tensor, got ndarray"),
])
def test_entropy_bad_input_is_named(w, error, words):
    with pytest.raises(error, match=words):
        attention_entropy(w)
