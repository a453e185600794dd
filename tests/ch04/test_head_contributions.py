"""Heads do not interact within a layer: W_O adds one contribution per head.

``Concat(head_0, ..., head_{h-1}) @ W_o`` is a block product, so it equals
``sum_i head_i @ W_o[i*d_h:(i+1)*d_h]``. Chapter 04 states this (instead of "W_O lets the heads
talk to each other") and chapter 09's head ablations rest on it. The oracle here computes each
head on its own with PyTorch's ``scaled_dot_product_attention`` on that head's columns of the
projections, never through the reference's split/merge.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch04.reference import multi_head_attention


def _head_alone(X, W_q, W_k, W_v, cols, mask):
    """One head's output (B, L, d_h) from its own columns only, by torch's SDPA in float64."""
    q, k, v = (torch.from_numpy(X @ W[:, cols]) for W in (W_q, W_k, W_v))
    attn_mask = None if mask is None else torch.from_numpy(mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).numpy()


@st.composite
def layers(draw):
    h = draw(st.integers(1, 6))
    d_h = draw(st.integers(1, 5))
    B, L = draw(st.integers(1, 3)), draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**32 - 1))
    causal = draw(st.booleans())
    return B, L, h, d_h, seed, causal


@settings(max_examples=60, deadline=None)
@given(layers())
def test_output_is_the_sum_of_per_head_contributions(case):
    B, L, h, d_h, seed, causal = case
    d = h * d_h
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, d))
    W_q, W_k, W_v, W_o = (rng.normal(scale=d**-0.5, size=(d, d)) for _ in range(4))
    # A causal mask keeps every row non-empty, so torch's SDPA and ours agree on every row.
    mask = np.tril(np.ones((L, L), dtype=bool)) if causal else None

    out, _ = multi_head_attention(X, W_q, W_k, W_v, W_o, h, mask)

    contributions = []
    for i in range(h):
        rows = slice(i * d_h, (i + 1) * d_h)
        contributions.append(_head_alone(X, W_q, W_k, W_v, rows, mask) @ W_o[rows])
    np.testing.assert_allclose(out, np.sum(contributions, axis=0), rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(layers(), st.data())
def test_a_head_changes_only_its_own_contribution(case, data):
    """Replacing one head's W_q, W_k, W_v columns moves the output by exactly the change of that
    head's contribution: no other head's term notices (no interaction within the layer)."""
    B, L, h, d_h, seed, _ = case
    d = h * d_h
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, d))
    Ws = [rng.normal(scale=d**-0.5, size=(d, d)) for _ in range(4)]
    i = data.draw(st.integers(0, h - 1))
    rows = slice(i * d_h, (i + 1) * d_h)
    changed = [W.copy() for W in Ws]
    for W in changed[:3]:
        W[:, rows] = rng.normal(scale=d**-0.5, size=(d, d_h))

    before, _ = multi_head_attention(X, *Ws, h)
    after, _ = multi_head_attention(X, *changed, h)
    W_o = Ws[3]
    delta = (_head_alone(X, *changed[:3], rows, None) - _head_alone(X, *Ws[:3], rows, None)) @ W_o[rows]
    np.testing.assert_allclose(after - before, delta, rtol=1e-9, atol=1e-11)
