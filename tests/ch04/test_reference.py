"""Tests for the chapter-04 reference maths in ``mhsa_ref.chapters.ch04.reference``.

1. PyTorch as an oracle: ``torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True)``
   in float64 with its weights copied from ours. torch stores weights as (d_out, d_in), so
   ``in_proj_weight`` is W_q^T, W_k^T, W_v^T stacked along dim 0 and ``out_proj.weight`` is
   W_o^T; its boolean ``attn_mask`` means True = NOT allowed, the opposite of ours.
   Outputs and per-head weights (``average_attn_weights=False``) must agree.
2. Hypothesis properties: merge(split(X)) == X; one head equals single-head attention with
   the same matrices; permutation equivariance over the sequence; inputs untouched.
3. Errors that name the argument and the shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import hypothesis.extra.numpy as hnp
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch01.reference import scaled_dot_product_attention
from mhsa_ref.chapters.ch04.reference import head_contributions, merge_heads, multi_head_attention, split_heads

RTOL = 1e-10
ATOL = 1e-12


def _weights(rng, d):
    return [rng.normal(scale=d**-0.5, size=(d, d)) for _ in range(4)]


def torch_mha(X, W_q, W_k, W_v, W_o, h, mask=None):
    """(out, per-head weights) from torch's nn.MultiheadAttention with our weights."""
    B, L, d = X.shape
    mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([W_q.T, W_k.T, W_v.T], axis=0)))
        mha.out_proj.weight.copy_(torch.from_numpy(np.ascontiguousarray(W_o.T)))
    x = torch.from_numpy(np.array(X))
    attn_mask = None
    if mask is not None:
        # torch wants (L, L) or (B*h, L, L) with True = blocked.
        full = np.broadcast_to(mask, (B, h, L, L)).reshape(B * h, L, L)
        attn_mask = torch.from_numpy(~full)
    mha.eval()
    with torch.no_grad():
        out, w = mha(x, x, x, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    return out.numpy(), w.numpy()


@pytest.mark.parametrize("B, L, d, h", [(1, 5, 8, 1), (2, 6, 8, 2), (3, 4, 12, 4), (2, 7, 12, 12), (1, 3, 16, 8)])
def test_matches_torch_multihead_attention(B, L, d, h):
    rng = np.random.default_rng(B * 100 + L * 10 + h)
    X = rng.normal(size=(B, L, d))
    Ws = _weights(rng, d)
    out, weights = multi_head_attention(X, *Ws, h)
    t_out, t_w = torch_mha(X, *Ws, h)
    assert out.shape == (B, L, d) and weights.shape == (B, h, L, L)
    assert out.dtype == weights.dtype == np.float64
    np.testing.assert_allclose(out, t_out, rtol=RTOL, atol=1e-11)
    np.testing.assert_allclose(weights, t_w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("h", [1, 2, 4])
def test_matches_torch_with_causal_mask(h):
    rng = np.random.default_rng(h)
    B, L, d = 2, 5, 8
    X = rng.normal(size=(B, L, d))
    Ws = _weights(rng, d)
    causal = np.tril(np.ones((L, L), dtype=bool))
    out, weights = multi_head_attention(X, *Ws, h, mask=causal)
    t_out, t_w = torch_mha(X, *Ws, h, mask=causal)
    np.testing.assert_allclose(out, t_out, rtol=RTOL, atol=1e-11)
    np.testing.assert_allclose(weights, t_w, rtol=RTOL, atol=ATOL)
    assert np.all(weights[..., ~causal] == 0.0)


def test_matches_torch_with_per_head_mask():
    # A mask that differs per batch element and per head, every row keeping at least one key.
    rng = np.random.default_rng(5)
    B, L, d, h = 2, 6, 8, 2
    X = rng.normal(size=(B, L, d))
    Ws = _weights(rng, d)
    mask = rng.random((B, h, L, L)) < 0.5
    mask[..., 0] = True
    out, weights = multi_head_attention(X, *Ws, h, mask=mask)
    t_out, t_w = torch_mha(X, *Ws, h, mask=mask)
    np.testing.assert_allclose(out, t_out, rtol=RTOL, atol=1e-11)
    np.testing.assert_allclose(weights, t_w, rtol=RTOL, atol=ATOL)


def test_head_i_uses_columns_i_dh_to_i_plus_one_dh():
    # The contiguous-split convention, checked by hand for every head.
    rng = np.random.default_rng(11)
    B, L, d, h = 2, 5, 12, 3
    d_h = d // h
    X = rng.normal(size=(B, L, d))
    W_q, W_k, W_v, W_o = _weights(rng, d)
    _, weights = multi_head_attention(X, W_q, W_k, W_v, W_o, h)
    for i in range(h):
        cols = slice(i * d_h, (i + 1) * d_h)
        _, w_i = scaled_dot_product_attention(X @ W_q[:, cols], X @ W_k[:, cols], X @ W_v[:, cols])
        np.testing.assert_allclose(weights[:, i], w_i, rtol=RTOL, atol=ATOL)


def test_fully_masked_rows_are_zero():
    rng = np.random.default_rng(2)
    B, L, d, h = 1, 4, 8, 2
    X = rng.normal(size=(B, L, d))
    mask = np.ones((B, h, L, L), dtype=bool)
    mask[0, 1, 2] = False  # head 1, query 2 sees nothing
    out, weights = multi_head_attention(X, *_weights(rng, d), h, mask=mask)
    assert np.all(weights[0, 1, 2] == 0.0)
    assert np.isfinite(out).all()


# --------------------------------------------------------------------------------------------
# Hypothesis properties
# --------------------------------------------------------------------------------------------

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


@st.composite
def shapes_and_heads(draw):
    h = draw(st.integers(1, 4))
    d_h = draw(st.integers(1, 4))
    B = draw(st.integers(1, 3))
    L = draw(st.integers(1, 5))
    return B, L, h, d_h


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dims=shapes_and_heads())
def test_merge_inverts_split(data, dims):
    B, L, h, d_h = dims
    X = data.draw(hnp.arrays(np.float64, (B, L, h * d_h), elements=finite))
    before = X.copy()
    S = split_heads(X, h)
    assert S.shape == (B, h, L, d_h)
    np.testing.assert_array_equal(S[:, 0], X[..., :d_h])  # head 0 is the first d_h columns
    np.testing.assert_array_equal(merge_heads(S), X)
    np.testing.assert_array_equal(split_heads(merge_heads(S), h), S)
    np.testing.assert_array_equal(X, before)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), B=st.integers(1, 3), L=st.integers(1, 6), d=st.integers(1, 6))
def test_one_head_is_single_head_attention(seed, B, L, d):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, d))
    W_q, W_k, W_v, W_o = _weights(rng, d)
    out, weights = multi_head_attention(X, W_q, W_k, W_v, W_o, 1)
    single, w = scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v)
    np.testing.assert_allclose(out, single @ W_o, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights[:, 0], w, rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dims=shapes_and_heads())
def test_permutation_equivariance_and_inputs_untouched(seed, dims):
    B, L, h, d_h = dims
    d = h * d_h
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, d))
    Ws = _weights(rng, d)
    copies = [a.copy() for a in [X, *Ws]]
    perm = rng.permutation(L)
    out, weights = multi_head_attention(X, *Ws, h)
    out_p, weights_p = multi_head_attention(X[:, perm], *Ws, h)
    np.testing.assert_allclose(out_p, out[:, perm], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, :, perm][:, :, :, perm], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    for a, b in zip([X, *Ws], copies):
        np.testing.assert_array_equal(a, b)


def test_parameter_count_is_independent_of_num_heads():
    # Per head: W_q, W_k, W_v slices of d x d_h, and a d_h x d slice of W_o: 4 d d_h; times h.
    d = 48
    for h in [k for k in range(1, d + 1) if d % k == 0]:
        d_h = d // h
        assert h * 4 * d * d_h == 4 * d * d
    mha = torch.nn.MultiheadAttention(d, 6, bias=False)
    assert sum(p.numel() for p in mha.parameters()) == 4 * d * d


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_split_errors():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=3"):
        split_heads(np.zeros((1, 2, 10)), 3)
    with pytest.raises(ValueError, match=r"X must have shape \(B, L, d_model\), got shape \(2, 10\)"):
        split_heads(np.zeros((2, 10)), 2)
    with pytest.raises(ValueError, match="num_heads must be at least 1"):
        split_heads(np.zeros((1, 2, 4)), 0)
    with pytest.raises(TypeError, match="num_heads must be an int, got float"):
        split_heads(np.zeros((1, 2, 4)), 2.0)
    with pytest.raises(TypeError, match="X must hold real numbers"):
        split_heads(np.array([[["a"]]]), 1)


def test_merge_errors():
    with pytest.raises(ValueError, match=r"X must have shape \(B, num_heads, L, d_head\), got shape \(2, 3, 4\)"):
        merge_heads(np.zeros((2, 3, 4)))


def test_multi_head_attention_errors():
    X = np.zeros((2, 3, 8))
    W = np.eye(8)
    with pytest.raises(ValueError, match=r"d_model=8 is not divisible by num_heads=3"):
        multi_head_attention(X, W, W, W, W, 3)
    with pytest.raises(ValueError, match=r"W_k must have shape \(d_model, d_model\) = \(8, 8\).*got shape \(8, 4\)"):
        multi_head_attention(X, W, np.zeros((8, 4)), W, W, 2)
    with pytest.raises(ValueError, match=r"X must have shape \(B, L, d_model\), got shape \(3, 8\)"):
        multi_head_attention(X[0], W, W, W, W, 2)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast to .*\(2, 2, 3, 3\)"):
        multi_head_attention(X, W, W, W, W, 2, mask=np.ones((4, 4), dtype=bool))
    with pytest.raises(TypeError, match="mask must be a boolean array"):
        multi_head_attention(X, W, W, W, W, 2, mask=np.ones((3, 3)))


# ---------------------------------------------------------------------------------------------
# head_contributions (the stretch exercise): each head's term, checked against torch's own layer
# with every other head's block of W_o's rows set to zero.


def test_head_contributions_are_torch_mha_with_one_head_kept():
    rng = np.random.default_rng(11)
    B, L, d, h = 2, 5, 12, 3
    X = rng.normal(size=(B, L, d))
    W_q, W_k, W_v, W_o = _weights(rng, d)
    mask = rng.random((B, 1, L, L)) < 0.7
    contrib = head_contributions(X, W_q, W_k, W_v, W_o, h, mask)
    assert contrib.shape == (B, h, L, d)
    d_h = d // h
    for i in range(h):
        W_i = np.zeros_like(W_o)
        W_i[i * d_h:(i + 1) * d_h] = W_o[i * d_h:(i + 1) * d_h]
        want, _ = torch_mha(X, W_q, W_k, W_v, W_i, h, mask)
        np.testing.assert_allclose(contrib[:, i], want, rtol=RTOL, atol=ATOL)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), B=st.integers(1, 3), L=st.integers(1, 6),
       h=st.sampled_from([1, 2, 3, 4]), d_h=st.integers(1, 4), masked=st.booleans())
def test_property_head_contributions_sum_to_the_layer_and_leave_inputs_alone(seed, B, L, h, d_h, masked):
    rng = np.random.default_rng(seed)
    d = h * d_h
    X = rng.normal(size=(B, L, d))
    Ws = _weights(rng, d)
    mask = rng.random((B, h, L, L)) < 0.6 if masked else None
    before = [a.copy() for a in (X, *Ws)]
    contrib = head_contributions(X, *Ws, h, mask)
    out, _ = multi_head_attention(X, *Ws, h, mask)
    np.testing.assert_allclose(contrib.sum(axis=1), out, rtol=1e-9, atol=1e-12)
    for a, b in zip((X, *Ws), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("change, match", [
    (lambda a: {**a, "num_heads": 5}, "d_model=8 is not divisible by num_heads=5"),
    (lambda a: {**a, "W_o": np.ones((8, 4))}, r"W_o must have shape \(d_model, d_model\)"),
    (lambda a: {**a, "mask": np.ones((3, 3), dtype=bool)}, "mask of shape"),
])
def test_head_contributions_bad_input_names_the_argument(change, match):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 4, 8))
    W_q, W_k, W_v, W_o = _weights(rng, 8)
    args = dict(X=X, W_q=W_q, W_k=W_k, W_v=W_v, W_o=W_o, num_heads=2, mask=None)
    with pytest.raises(ValueError, match=match):
        head_contributions(**change(args))
