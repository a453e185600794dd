"""Tests for the chapter-03 reference masks in ``mhsa_ref.chapters.ch03.reference``.

Evidence independent of the code under test:

1. PyTorch oracles: ``torch.ones(L, L).tril()`` / ``torch.tril`` for the causal mask,
   ``torch.arange(L) < lengths[:, None]`` for the padding mask, and
   ``torch.nn.functional.scaled_dot_product_attention`` (with a mask built by torch, and with
   ``is_causal=True``) against chapter 01's reference attention with ``build_attention_mask``.
2. Hypothesis properties: under a causal mask the output at position i does not change when
   tokens after i change (and does without the mask); padded keys get zero weight and their
   values are ignored; the (B, 1, L, L) mask broadcasts over heads.
3. Validation: bad arguments raise errors naming the argument and its values or shape; inputs
   are never modified; outputs are boolean.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch01.reference import scaled_dot_product_attention
from mhsa_ref.chapters.ch03.reference import build_attention_mask, causal_mask, packed_mask, padding_mask

F = torch.nn.functional


@st.composite
def lengths_and_L(draw, min_length=0):
    L = draw(st.integers(1, 9))
    B = draw(st.integers(1, 5))
    lengths = draw(st.lists(st.integers(min_length, L), min_size=B, max_size=B))
    return np.array(lengths, dtype=np.int64), L


# --------------------------------------------------------------------------------------------
# 1. Oracles
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 2, 3, 8, 17])
def test_causal_mask_is_torch_tril(L):
    got = causal_mask(L)
    assert got.dtype == np.bool_ and got.shape == (L, L)
    np.testing.assert_array_equal(got, torch.ones(L, L).tril().bool().numpy())
    np.testing.assert_array_equal(got, torch.tril(torch.ones(L, L, dtype=torch.bool)).numpy())


@given(lengths_and_L())
def test_padding_mask_is_torch_arange_comparison(args):
    lengths, L = args
    got = padding_mask(lengths, L)
    want = (torch.arange(L) < torch.from_numpy(lengths)[:, None]).numpy()
    assert got.dtype == np.bool_ and got.shape == (len(lengths), L)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got.sum(axis=1), lengths)


def _qkv(seed, B, h, L, d=4):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(B, h, L, d)) for _ in range(3))


def _torch_sdpa(Q, K, V, **kwargs):
    t = [torch.from_numpy(a) for a in (Q, K, V)]
    return F.scaled_dot_product_attention(*t, **kwargs).numpy()


@settings(max_examples=40, deadline=None)
@given(lengths_and_L(min_length=1), st.booleans(), st.integers(1, 3), st.integers(0, 2**16))
def test_combined_mask_matches_torch_sdpa(args, causal, h, seed):
    # Every length >= 1, so no row is fully masked (torch gives NaN there; we give zeros).
    lengths, L = args
    Q, K, V = _qkv(seed, len(lengths), h, L)
    key_ok = torch.arange(L) < torch.from_numpy(lengths)[:, None]  # (B, L), built by torch
    torch_mask = key_ok[:, None, None, :].expand(len(lengths), 1, L, L)
    if causal:
        torch_mask = torch_mask & torch.ones(L, L, dtype=torch.bool).tril()
    want = _torch_sdpa(Q, K, V, attn_mask=torch_mask)
    got, weights = scaled_dot_product_attention(Q, K, V, build_attention_mask(lengths, L, causal))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert weights.shape == (len(lengths), h, L, L)


@pytest.mark.parametrize("L", [1, 2, 5, 9])
def test_causal_mask_matches_torch_is_causal(L):
    Q, K, V = _qkv(L, 2, 3, L)
    want = _torch_sdpa(Q, K, V, is_causal=True)
    full = np.full(2, L)
    got, _ = scaled_dot_product_attention(Q, K, V, build_attention_mask(full, L, causal=True))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    got2, _ = scaled_dot_product_attention(Q, K, V, causal_mask(L))
    np.testing.assert_allclose(got2, want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# 2. Properties
# --------------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 10), st.data(), st.integers(0, 2**16))
def test_causal_output_ignores_later_tokens(L, data, seed):
    i = data.draw(st.integers(0, L - 2), label="i")
    rng = np.random.default_rng(seed)
    d = 4
    X = rng.normal(size=(2, L, d))
    W_q, W_k, W_v = (rng.normal(size=(d, d)) for _ in range(3))
    X2 = X.copy()
    X2[:, i + 1 :] = rng.normal(size=(2, L - i - 1, d)) * 3  # change every token after i

    def attend(X, mask):
        return scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v, mask)[0]

    mask = causal_mask(L)
    np.testing.assert_allclose(attend(X2, mask)[:, : i + 1], attend(X, mask)[:, : i + 1], rtol=1e-12, atol=1e-12)
    # The property is not vacuous: without the mask, position i does see the change.
    assert not np.allclose(attend(X2, None)[:, : i + 1], attend(X, None)[:, : i + 1])
    # And with the mask, the positions after i (which see the change) do change.
    assert not np.allclose(attend(X2, mask)[:, i + 1 :], attend(X, mask)[:, i + 1 :])


@settings(max_examples=50, deadline=None)
@given(lengths_and_L(), st.booleans(), st.integers(0, 2**16))
def test_padded_keys_get_zero_weight_and_are_ignored(args, causal, seed):
    lengths, L = args
    B = len(lengths)
    Q, K, V = _qkv(seed, B, 2, L)
    mask = build_attention_mask(lengths, L, causal)
    out, w = scaled_dot_product_attention(Q, K, V, mask)
    padded = np.arange(L)[None, :] >= lengths[:, None]  # (B, L) keys that are padding
    on_padded = np.broadcast_to(padded[:, None, None, :], w.shape)
    assert np.all(w[on_padded] == 0.0)  # every weight on a padded key is exactly 0
    V2, K2 = V.copy(), K.copy()
    V2[np.broadcast_to(padded[:, None, :, None], V.shape)] = 1e6  # garbage in the padding
    K2[np.broadcast_to(padded[:, None, :, None], K.shape)] = -7.0
    out2, _ = scaled_dot_product_attention(Q, K2, V2, mask)
    np.testing.assert_allclose(out2, out, rtol=1e-12, atol=1e-12)
    # Rows with an allowed key sum to 1; rows without (length 0) are zero, never NaN.
    sums = w.sum(axis=-1)
    has_key = mask.any(axis=-1)
    np.testing.assert_allclose(sums[np.broadcast_to(has_key, sums.shape)], 1.0)
    assert np.all(out[lengths == 0] == 0.0) and np.isfinite(out).all()


@given(lengths_and_L(), st.booleans(), st.integers(1, 4))
def test_mask_structure_and_broadcast_over_heads(args, causal, h):
    lengths, L = args
    B = len(lengths)
    m = build_attention_mask(lengths, L, causal)
    assert m.dtype == np.bool_ and m.shape == (B, 1, L, L)
    full = np.broadcast_to(m, (B, h, L, L))  # the head axis broadcasts
    assert all(np.array_equal(full[:, k], m[:, 0]) for k in range(h))
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    for b, n in enumerate(lengths):
        want = (j < n) & ((j <= i) if causal else True)
        np.testing.assert_array_equal(m[b, 0], np.broadcast_to(want, (L, L)))
    # Only keys are blocked: a padded query row (i >= n) still has the real keys when not causal.
    if not causal:
        assert np.array_equal(m[:, 0].any(axis=-1), np.broadcast_to((lengths > 0)[:, None], (B, L)))
    # The combination is the & of the parts.
    combo = padding_mask(lengths, L)[:, None, None, :] & (causal_mask(L) if causal else True)
    np.testing.assert_array_equal(m, np.broadcast_to(combo, m.shape))


def test_output_is_writable_and_owned():
    m = build_attention_mask(np.array([2, 1]), 3, causal=True)
    assert m.flags.writeable and m.flags.owndata
    m[0, 0, 0, 0] = False  # does not raise (not a read-only broadcast view)


def test_inputs_are_not_modified():
    lengths = np.array([3, 0, 2])
    before = lengths.copy()
    padding_mask(lengths, 3)
    build_attention_mask(lengths, 3, causal=True)
    np.testing.assert_array_equal(lengths, before)
    assert lengths.dtype == before.dtype


def test_lists_and_numpy_ints_are_accepted():
    np.testing.assert_array_equal(padding_mask([2, 0], np.int64(3)), [[True, True, False], [False] * 3])
    assert causal_mask(np.int32(2)).tolist() == [[True, False], [True, True]]


# --------------------------------------------------------------------------------------------
# 3. Validation: errors name the argument and what was passed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, exc, pattern",
    [
        (lambda: causal_mask(0), ValueError, r"L must be a positive int.*L=0"),
        (lambda: causal_mask(-3), ValueError, r"L=-3"),
        (lambda: causal_mask(2.0), TypeError, r"L must be a positive int.*float"),
        (lambda: causal_mask(True), TypeError, r"L must be a positive int.*bool"),
        (lambda: padding_mask(np.array([1, 4]), 3), ValueError, r"lengths must lie between 0 and L=3.*\[4\].*\[1, 4\]"),
        (lambda: padding_mask(np.array([-1, 2]), 3), ValueError, r"lengths.*\[-1\]"),
        (lambda: padding_mask(np.array([[1, 2]]), 3), ValueError, r"lengths must be 1-D.*\(1, 2\)"),
        (lambda: padding_mask(np.array([1.0, 2.0]), 3), TypeError, r"lengths must hold integers.*float64.*\(2,\)"),
        (lambda: padding_mask(np.array([True]), 3), TypeError, r"lengths must hold integers.*bool"),
        (lambda: padding_mask(np.array([1]), 0), ValueError, r"L=0"),
        (lambda: build_attention_mask(np.array([5]), 4), ValueError, r"lengths.*L=4.*\[5\]"),
        (lambda: build_attention_mask(np.array([1]), 4, causal="yes"), TypeError, r"causal must be True or False"),
        (lambda: build_attention_mask(np.array(3), 4), ValueError, r"lengths must be 1-D.*\(\)"),
    ],
)
def test_bad_arguments_are_named(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_empty_batch_and_zero_length():
    assert padding_mask(np.array([], dtype=int), 3).shape == (0, 3)
    assert build_attention_mask(np.array([], dtype=int), 3).shape == (0, 1, 3, 3)
    m = build_attention_mask(np.array([0]), 3, causal=True)
    assert not m.any()
    Q, K, V = _qkv(0, 1, 1, 3)
    out, w = scaled_dot_product_attention(Q, K, V, m)
    assert np.all(out == 0.0) and np.all(w == 0.0)


# ---------------------------------------------------------------------------------------------
# 03.packed_mask (stretch)


@st.composite
def packed_rows(draw):
    """(B, L) ids in contiguous runs, with arbitrary (repeated across rows, unsorted) values."""
    B, L = draw(st.integers(1, 3)), draw(st.integers(1, 9))
    rows = []
    for _ in range(B):
        lengths, total = [], 0
        while total < L:
            n = draw(st.integers(1, L - total))
            lengths.append(n)
            total += n
        ids = draw(st.lists(st.integers(-5, 50), min_size=len(lengths), max_size=len(lengths), unique=True))
        rows.append(np.repeat(ids, lengths))
    return np.stack(rows)


@settings(max_examples=60, deadline=None)
@given(packed_rows(), st.booleans(), st.integers(0, 2**31 - 1))
def test_packed_attention_equals_each_document_alone_in_torch(ids, causal, seed):
    """The oracle is PyTorch's SDPA run on each document separately (is_causal for the causal
    case): attention over the packed row with the mask must give every document exactly that."""
    B, L = ids.shape
    mask = packed_mask(ids, causal)
    assert mask.shape == (B, 1, L, L) and mask.dtype == np.bool_
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.normal(size=(B, 2, L, 3)) for _ in range(3))
    out, _ = scaled_dot_product_attention(Q, K, V, mask)
    for b in range(B):
        for doc in np.unique(ids[b]):
            t = np.flatnonzero(ids[b] == doc)
            q, k, v = (torch.from_numpy(np.ascontiguousarray(a[b][:, t])) for a in (Q, K, V))
            want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            np.testing.assert_allclose(out[b][:, t], want.numpy(), rtol=1e-10, atol=1e-12)


def test_packed_mask_is_block_diagonal_and_one_document_is_causal_mask():
    ids = np.array([[4, 4, 2, 2, 2]])
    m = packed_mask(ids, causal=False)[0, 0]
    block = np.zeros((5, 5), dtype=bool)
    block[:2, :2] = block[2:, 2:] = True
    np.testing.assert_array_equal(m, block)
    np.testing.assert_array_equal(packed_mask(np.zeros((1, 6), dtype=int))[0, 0], causal_mask(6))


@pytest.mark.parametrize("args, exc, pattern", [
    ((np.zeros(4, dtype=int),), ValueError, r"segment_ids must have shape \(B, L\).*\(4,\)"),
    ((np.zeros((2, 0), dtype=int),), ValueError, r"L >= 1.*\(2, 0\)"),
    ((np.zeros((2, 3)),), TypeError, r"segment_ids must hold integers.*float64"),
    ((np.zeros((2, 3), dtype=bool),), TypeError, r"segment_ids must hold integers.*bool"),
    ((np.zeros((2, 3), dtype=int), 1), TypeError, r"causal must be True or False"),
])
def test_packed_mask_bad_arguments_are_named(args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        packed_mask(*args)


def test_packed_mask_does_not_modify_ids_and_is_writable():
    ids = np.array([[3, 3, 1]])
    m = packed_mask(ids)
    m[...] = False  # the caller may modify it
    np.testing.assert_array_equal(ids, [[3, 3, 1]])
