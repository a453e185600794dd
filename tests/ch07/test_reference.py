"""Tests for the chapter-07 reference code in ``mhsa_ref.chapters.ch07.reference``.

Evidence independent of the code under test:

1. PyTorch oracles: ``torch.nn.functional.scaled_dot_product_attention`` in float64, with a
   block-diagonal boolean mask for chunked attention and with ``is_causal`` (or no mask) for
   online softmax, also when the block size does not divide L and when Lq != Lk.
2. Hypothesis properties of ``merge_partials``: the state of the union of two key sets, computed
   directly; associativity, commutativity; the empty state (-inf, 0, 0) as identity.
3. Memory, measured with tracemalloc: online softmax holds O(L * block) bytes, far below plain
   attention's L x L; chunked attention holds one chunk.
4. Validation: bad arguments raise errors naming the argument; inputs are never modified.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch07.reference import chunked_attention, merge_partials, online_softmax_attention

F = torch.nn.functional


def sdpa(Q, K, V, mask=None, causal=False):
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, K, V)]
    m = None if mask is None else torch.from_numpy(mask)
    return F.scaled_dot_product_attention(*t, attn_mask=m, is_causal=causal).numpy()


def block_diagonal(L, c):
    chunk = np.arange(L) // c
    return chunk[:, None] == chunk[None, :]


def qkv(seed, batch, Lq, Lk, dk, dv, scale=1.0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=batch + (Lq, dk)) * scale, rng.normal(size=batch + (Lk, dk)) * scale,
            rng.normal(size=batch + (Lk, dv)))


def state(s, V):
    """(m, l, o) of scores s (..., Lq, n) over V (..., n, d_v), straight from the definition."""
    m = s.max(axis=-1) if s.shape[-1] else np.full(s.shape[:-1], -np.inf)
    p = np.exp(s - np.where(np.isneginf(m), 0.0, m)[..., None])
    return m, p.sum(-1), p @ V


# --------------------------------------------------------------------------------------------
# 1. Oracles
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("L, c", [(8, 4), (10, 4), (7, 3), (5, 1), (5, 8), (64, 16), (100, 7)])
def test_chunked_is_sdpa_with_a_block_diagonal_mask(L, c):
    Q, K, V = qkv(L * c, (2, 3), L, L, 5, 4)
    np.testing.assert_allclose(chunked_attention(Q, K, V, c), sdpa(Q, K, V, block_diagonal(L, c)),
                               rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 30), c=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_chunked_matches_sdpa_for_any_length_and_chunk(L, c, seed):
    Q, K, V = qkv(seed, (2,), L, L, 3, 2, scale=2.0)
    np.testing.assert_allclose(chunked_attention(Q, K, V, c), sdpa(Q, K, V, block_diagonal(L, c)),
                               rtol=1e-11, atol=1e-12)


def test_chunked_with_one_chunk_is_plain_attention_and_chunk_one_copies_v():
    Q, K, V = qkv(3, (), 9, 9, 4, 3)
    np.testing.assert_allclose(chunked_attention(Q, K, V, 9), sdpa(Q, K, V), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chunked_attention(Q, K, V, 1), V, rtol=1e-12, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(Lq=st.integers(1, 20), Lk=st.integers(1, 20), block=st.integers(1, 25), causal=st.booleans(),
       seed=st.integers(0, 2**16))
def test_online_softmax_equals_sdpa(Lq, Lk, block, causal, seed):
    Q, K, V = qkv(seed, (2,), Lq, Lk, 4, 3, scale=3.0)
    np.testing.assert_allclose(online_softmax_attention(Q, K, V, block, causal=causal),
                               sdpa(Q, K, V, causal=causal), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block", [1, 7, 64, 100, 300, 512])
@pytest.mark.parametrize("causal", [False, True])
def test_online_softmax_equals_sdpa_to_float64_rounding(block, causal):
    Q, K, V = qkv(block, (2,), 300, 300, 16, 8)
    err = np.abs(online_softmax_attention(Q, K, V, block, causal=causal) - sdpa(Q, K, V, causal=causal)).max()
    assert err < 1e-13


def test_online_softmax_with_every_score_far_below_zero_is_finite_and_exact():
    # A running maximum started at 0 would give exp(-1800) = 0 and 0 / 0 here.
    Q, K, V = qkv(5, (), 6, 9, 4, 3)
    Q, K = Q * 0.1 + 30.0, K * 0.1 - 30.0
    assert (Q @ K.T / 2).max() < -1000
    for causal in (False, True):
        K6, V6 = (K, V) if not causal else (K[:6], V[:6])
        out = online_softmax_attention(Q, K6, V6, 2, causal=causal)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out, sdpa(Q, K6, V6, causal=causal), rtol=1e-10, atol=1e-12)


def test_online_softmax_broadcasts_batch_axes_and_handles_no_keys():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(3, 1, 5, 4)), rng.normal(size=(1, 2, 6, 4)), rng.normal(size=(1, 2, 6, 3))
    want = sdpa(np.broadcast_to(Q, (3, 2, 5, 4)), np.broadcast_to(K, (3, 2, 6, 4)), np.broadcast_to(V, (3, 2, 6, 3)))
    np.testing.assert_allclose(online_softmax_attention(Q, K, V, 4), want, rtol=1e-12, atol=1e-12)
    empty = online_softmax_attention(Q[0, 0], np.zeros((0, 4)), np.zeros((0, 3)), 4)
    assert empty.shape == (5, 3) and not empty.any()  # no key at all: zero output, never NaN


# --------------------------------------------------------------------------------------------
# 2. merge_partials: properties
# --------------------------------------------------------------------------------------------


@st.composite
def key_sets(draw):
    """Scores of Lq queries against three disjoint key sets (some rows of some sets empty)."""
    seed = draw(st.integers(0, 2**16))
    Lq, dv = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    sizes = [draw(st.integers(0, 4)) for _ in range(3)]
    rng = np.random.default_rng(seed)
    sets = []
    for n in sizes:
        s = rng.normal(size=(Lq, n)) * draw(st.sampled_from([1.0, 10.0, 300.0]))
        if n and draw(st.booleans()):
            s[rng.random(Lq) < 0.5] = -np.inf  # queries that see none of this set's keys
        sets.append((s, rng.normal(size=(n, dv))))
    return sets


def _close(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(key_sets())
def test_merge_gives_the_state_of_the_union(sets):
    (s1, v1), (s2, v2), _ = sets
    merged = merge_partials(*state(s1, v1), *state(s2, v2))
    _close(merged, state(np.concatenate([s1, s2], axis=-1), np.concatenate([v1, v2])))
    assert not any(np.isnan(a).any() for a in merged)


@settings(max_examples=60, deadline=None)
@given(key_sets())
def test_merge_is_associative_and_commutative_with_the_empty_state_as_identity(sets):
    A, B, C = (state(s, v) for s, v in sets)
    _close(merge_partials(*merge_partials(*A, *B), *C), merge_partials(*A, *merge_partials(*B, *C)))
    _close(merge_partials(*A, *B), merge_partials(*B, *A))
    Lq, dv = A[2].shape
    empty = (np.full(Lq, -np.inf), np.zeros(Lq), np.zeros((Lq, dv)))
    _close(merge_partials(*A, *empty), A)
    _close(merge_partials(*empty, *empty), empty)


# --------------------------------------------------------------------------------------------
# 3. Memory
# --------------------------------------------------------------------------------------------


def peak(fn, *args):
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_online_and_chunked_never_hold_the_L_by_L_matrix():
    L, block = 2048, 64
    Q, K, V = qkv(0, (), L, L, 16, 16)
    matrix = 8 * L * L  # one (L, L) float64 array: 32 MiB
    online = peak(online_softmax_attention, Q, K, V, block, True)
    chunked = peak(chunked_attention, Q, K, V, block)
    assert online < 8 * 8 * L * block, online  # a few (L, block) arrays, not (L, L)
    assert online < matrix / 4 and chunked < matrix / 10, (online, chunked)


# --------------------------------------------------------------------------------------------
# 4. Validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, error, words", [
    (0, ValueError, "chunk_size must be a positive int, got chunk_size=0"),
    (2.0, TypeError, "chunk_size must be a positive int"),
    (True, TypeError, "chunk_size must be a positive int"),
])
def test_chunk_size_is_validated(bad, error, words):
    Q, K, V = qkv(0, (), 4, 4, 2, 2)
    with pytest.raises(error, match=words):
        chunked_attention(Q, K, V, bad)


def test_shapes_and_flags_are_validated_with_the_argument_named():
    Q, K, V = qkv(0, (), 4, 5, 2, 2)
    with pytest.raises(ValueError, match=r"as many keys as queries, got Q \(4, 2\) and K \(5, 2\)"):
        chunked_attention(Q, K, V, 2)
    with pytest.raises(ValueError, match=r"K and V must have the same number of keys"):
        online_softmax_attention(Q, K, V[:3], 2)
    with pytest.raises(ValueError, match=r"block_size must be a positive int, got block_size=-1"):
        online_softmax_attention(Q, K, V, -1)
    with pytest.raises(TypeError, match=r"causal must be True or False, got str 'yes'"):
        online_softmax_attention(Q, K, V, 2, causal="yes")
    m, l, o = np.zeros(3), np.ones(3), np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"got m1 \(3,\) and l2 \(4,\)"):
        merge_partials(m, l, o, m, np.ones(4), o)
    with pytest.raises(ValueError, match=r"o2 must have shape m1.shape \+ \(d_v,\)"):
        merge_partials(m, l, o, m, l, np.zeros((4, 2)))


def test_inputs_are_never_modified():
    Q, K, V = qkv(1, (2,), 6, 6, 3, 2)
    before = [a.copy() for a in (Q, K, V)]
    chunked_attention(Q, K, V, 4)
    online_softmax_attention(Q, K, V, 4, causal=True)
    for a, b in zip((Q, K, V), before):
        np.testing.assert_array_equal(a, b)
    states = state(Q @ K.swapaxes(-1, -2), V) + state(K @ Q.swapaxes(-1, -2), V)
    copies = [a.copy() for a in states]
    merge_partials(*states)
    for a, b in zip(states, copies):
        np.testing.assert_array_equal(a, b)
