"""Chapter 08's reference against independent oracles: PyTorch's own scaled_dot_product_attention
and autograd through it, torch.autograd.gradcheck in float64, torch.func.vjp for the softmax's
backward, and hypothesis properties; and what it keeps for backward, measured."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch08.reference import softmax_backward
from mhsa_ref.chapters.ch08.reference_torch import activation_bytes_per_layer, attention, recomputed_attention
from mhsa_ref.untrusted.harness import saved_bytes


def _qkv(seed, B=2, h=3, L=7, d=5, d_v=4, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, h, L, n, generator=g, dtype=dtype, requires_grad=True) for n in (d, d, d_v)]


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_gradients_equal_sdpa(causal):
    q, k, v = _qkv(0)
    out = recomputed_attention(q, k, v, causal)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs_out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    theirs = torch.autograd.grad(theirs_out, (q, k, v), grad)
    torch.testing.assert_close(out, theirs_out, rtol=1e-12, atol=1e-12)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(causal):
    q, k, v = _qkv(1, B=1, h=2, L=5, d=3, d_v=2)
    assert torch.autograd.gradcheck(lambda a, b, c: recomputed_attention(a, b, c, causal), (q, k, v))


def test_float32_keeps_dtype_and_matches_plain_attention():
    q, k, v = (t.detach().float().requires_grad_() for t in _qkv(2))
    out = recomputed_attention(q, k, v, True)
    assert out.dtype == torch.float32 and out.shape == (2, 3, 7, 4)
    out.sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    attention(q, k, v, True).sum().backward()
    for a, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(a, t.grad, rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 9), d=st.integers(1, 6), d_v=st.integers(1, 5), causal=st.booleans(),
       seed=st.integers(0, 10_000))
def test_property_gradients_match_autograd_through_sdpa(L, d, d_v, causal, seed):
    q, k, v = _qkv(seed, B=1, h=2, L=L, d=d, d_v=d_v)
    out = recomputed_attention(q, k, v, causal)
    grad = torch.ones_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_keeps_only_q_k_v_and_one_number_per_row():
    q, k, v = (t.detach().float().requires_grad_() for t in _qkv(3, B=1, h=2, L=256, d=8, d_v=8))
    with saved_bytes() as mine:
        out = recomputed_attention(q, k, v, True)
    mine.add_attributes(out)
    rows = 1 * 2 * 256
    assert mine.total == 3 * q.nbytes + rows * 4  # q, k, v and the float32 logsumexp
    with saved_bytes() as plain:
        attention(q, k, v, True)
    weights = rows * 256 * 4
    assert plain.total >= weights + 3 * q.nbytes  # at least the weights, q, k, v


def test_inputs_are_not_modified_and_bad_shapes_are_named():
    q, k, v = _qkv(4)
    before = [t.detach().clone() for t in (q, k, v)]
    recomputed_attention(q, k, v).sum().backward()
    for a, b in zip(before, (q, k, v)):
        assert torch.equal(a, b.detach())
    with pytest.raises(ValueError, match=r"q \(2, 3, 7, 5\), k \(2, 3, 7, 4\)"):
        recomputed_attention(q, k[..., :4], v)
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        recomputed_attention(q, k.detach().numpy(), v)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 10_000))
def test_softmax_backward_equals_autograds_vjp(shape, seed):
    rng = np.random.default_rng(seed)
    s, g = rng.standard_normal(shape), rng.standard_normal(shape)
    p, vjp = torch.func.vjp(lambda x: torch.softmax(x, -1), torch.from_numpy(s))
    ours = softmax_backward(p.numpy(), g)
    np.testing.assert_allclose(ours, vjp(torch.from_numpy(g))[0].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.sum(-1), 0.0, atol=1e-12)  # shifting all scores changes nothing


def test_softmax_backward_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"p has shape \(3,\) but grad has shape \(4,\)"):
        softmax_backward(np.ones(3) / 3, np.ones(4))


def test_korthikanti_formula_gives_their_70_percent_for_gpt3():
    s, b, h, a = 2048, 1, 12288, 96  # GPT-3 175B at its 2K context
    none, selective = activation_bytes_per_layer(s, b, h, a), activation_bytes_per_layer(s, b, h, a, "selective")
    assert none == s * b * h * (34 + 5 * a * s / h)
    assert 5 * a * s / h == 80
    assert math.isclose(1 - selective / none, 80 / 114)  # "70% reduction"
    with pytest.raises(ValueError, match="policy="):
        activation_bytes_per_layer(s, b, h, a, "half")
