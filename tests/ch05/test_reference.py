"""Chapter 05's reference, checked against independent oracles: PyTorch's own
nn.MultiheadAttention and F.scaled_dot_product_attention, and chapter 04's NumPy version."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from mhsa_ref.chapters.ch04 import reference as heads
from mhsa_ref.chapters.ch05.reference_torch import MultiHeadSelfAttention, from_torch_mha, mha_mask, to_torch_mha

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def make(d=16, h=4, bias=True, dropout=0.0, fast=True, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    m = MultiHeadSelfAttention(d, h, bias=bias, dropout=dropout).to(dtype)
    m.fast = fast
    return m


def causal(L):
    return torch.tril(torch.ones(L, L, dtype=torch.bool))


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "explicit"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("masked", ["none", "causal", "padding"])
def test_equals_nn_multihead_attention(fast, bias, masked):
    m = make(bias=bias, fast=fast)
    mha = to_torch_mha(m)
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    mask = {"none": None, "causal": causal(7),
            "padding": (torch.arange(7) < torch.tensor([3, 7, 5])[:, None])[:, None, None, :]}[masked]
    ours = m(x, mask)
    kwargs = {} if mask is None else {"attn_mask": mha_mask(mask, 4, batch_size=3)}
    theirs = mha(x, x, x, need_weights=False, **kwargs)[0]
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "explicit"])
def test_equals_chapter_04_numpy_version_with_transposed_weights(fast):
    m = make(d=12, h=3, bias=False, fast=fast)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = causal(5).repeat(2, 1, 1, 1)
    mask[1, 0, 3] = False  # a query with no allowed key: zeros on both sides
    ours = m(x, mask).detach().numpy()
    W = [lin.weight.detach().numpy().T for lin in (m.W_q, m.W_k, m.W_v, m.W_o)]  # (d_in, d_out)
    theirs, _ = heads.multi_head_attention(x.numpy(), *W, num_heads=3, mask=mask.numpy())
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_fast_and_explicit_paths_agree_in_value_and_gradient_with_empty_rows():
    fast, explicit = make(fast=True), make(fast=False)
    explicit.load_state_dict(fast.state_dict())
    mask = torch.rand(2, 4, 6, 6, generator=torch.Generator().manual_seed(1)) < 0.6
    mask[0, :, 2] = False  # query 2 may attend to nothing, in every head
    results = []
    for m in (fast, explicit):
        x = torch.randn(2, 6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2),
                        requires_grad=True)
        out = m(x, mask)
        out.backward(torch.ones_like(out))
        results.append((out, x.grad, [p.grad for p in m.parameters()]))
        assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in m.parameters())
        # The empty row's attention output is zero, so what comes out is W_o's bias.
        torch.testing.assert_close(out[0, 2], m.W_o.bias.expand(16))
    (a, ga, pa), (b, gb, pb) = results
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(ga, gb)
    for u, v in zip(pa, pb):
        torch.testing.assert_close(u, v)


def test_heads_are_sdpa_on_contiguous_column_blocks():
    # An independent route: project, cut columns into heads by hand, call PyTorch's SDPA per head.
    m = make(d=8, h=2)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    q, k, v = m.W_q(x), m.W_k(x), m.W_v(x)
    per_head = [F.scaled_dot_product_attention(q[..., i:i + 4], k[..., i:i + 4], v[..., i:i + 4], is_causal=True)
                for i in (0, 4)]
    expected = m.W_o(torch.cat(per_head, dim=-1))
    torch.testing.assert_close(m(x, causal(5)), expected)


@pytest.mark.parametrize("bias", [True, False])
def test_from_torch_mha_computes_what_mha_computes(bias):
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(12, 3, bias=bias, batch_first=True).double()
    with torch.no_grad():  # nn.MultiheadAttention starts with zero biases: make them count
        for p in mha.parameters():
            p.normal_(0.0, 0.3)
    ours = from_torch_mha(mha)
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    mask = causal(6)
    torch.testing.assert_close(ours(x, mask), mha(x, x, x, attn_mask=mha_mask(mask, 3))[0], rtol=1e-10, atol=1e-12)
    assert ours.training == mha.training and ours.W_q.weight.dtype == torch.float64
    # The copy is a copy: changing the new module leaves mha alone.
    before = mha.in_proj_weight.detach().clone()
    with torch.no_grad():
        ours.W_q.weight.zero_()
    assert torch.equal(mha.in_proj_weight, before)


def test_round_trip_through_nn_multihead_attention_is_exact():
    m = make(d=8, h=2)
    back = from_torch_mha(to_torch_mha(m))
    for (n1, p1), (n2, p2) in zip(sorted(m.state_dict().items()), sorted(back.state_dict().items())):
        assert n1 == n2 and torch.equal(p1, p2)


def test_mha_mask_shapes_and_meaning():
    mask = causal(3)
    assert torch.equal(mha_mask(mask, 2), ~mask)
    batched = torch.stack([causal(3), torch.ones(3, 3, dtype=torch.bool)])[:, None]  # (2, 1, 3, 3)
    out = mha_mask(batched, num_heads=4)
    assert out.shape == (8, 3, 3)
    assert torch.equal(out[:4], (~causal(3)).expand(4, 3, 3)) and not out[4:].any()


def test_dropout_only_in_training_mode():
    for fast in (True, False):
        m = make(dropout=0.5, fast=fast)
        x = torch.randn(2, 6, 16, dtype=torch.float64)
        m.train()
        a, b = m(x), m(x)
        assert not torch.allclose(a, b), "dropout in training mode makes two calls differ"
        m.eval()
        c, d = m(x), m(x)
        assert torch.equal(c, d)
        m2 = make(dropout=0.0, fast=fast)
        m2.load_state_dict(m.state_dict())
        torch.testing.assert_close(c, m2.train()(x))  # eval with p=0.5 == train with p=0


def test_keeps_dtype_and_does_not_modify_inputs():
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        m = make(dtype=dtype)
        x = torch.randn(1, 4, 16).to(dtype)
        mask = causal(4)
        x0, mask0 = x.clone(), mask.clone()
        assert m(x, mask).dtype == dtype
        assert torch.equal(x, x0) and torch.equal(mask, mask0)


@pytest.mark.parametrize("call, match", [
    (lambda: MultiHeadSelfAttention(10, 3), r"d_model=10 is not divisible by num_heads=3"),
    (lambda: MultiHeadSelfAttention(8, 0), r"num_heads must be a positive int"),
    (lambda: MultiHeadSelfAttention(8, 2, dropout=1.0), r"dropout must be in \[0, 1\)"),
    (lambda: make()(torch.randn(2, 5, 8)), r"x must have shape \(B, L, d_model=16\), got \(2, 5, 8\)"),
    (lambda: make()(torch.randn(5, 16)), r"got \(5, 16\)"),
    (lambda: make()(torch.randn(1, 5, 16, dtype=torch.float64), torch.ones(5, 5)), r"mask must be a boolean tensor"),
    (lambda: make()(torch.randn(1, 5, 16, dtype=torch.float64), causal(4)), r"mask of shape \(4, 4\) does not broadcast"),
    (lambda: from_torch_mha(nn.MultiheadAttention(8, 2)), r"batch_first=True"),
    (lambda: from_torch_mha(nn.Linear(8, 8)), r"mha must be an nn.MultiheadAttention"),
])
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("call, error, match", [
    (lambda: make()(torch.randn(1, 5, 16, dtype=torch.float64), causal(5), is_causal=True), ValueError,
     r"either mask or is_causal=True, not both"),
    (lambda: make()(torch.randn(1, 5, 16, dtype=torch.float64), is_causal=1), TypeError,
     r"is_causal must be a bool, got int"),
    (lambda: make()(torch.randn(1, 5, 16, dtype=torch.float64), is_causal=causal(5)), TypeError,
     r"is_causal must be a bool, got Tensor"),
])
def test_is_causal_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), L=st.integers(1, 12), h=st.sampled_from([1, 2, 4]), d_h=st.integers(1, 5),
       fast=st.booleans(), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_property_is_causal_equals_the_causal_mask_and_torch(B, L, h, d_h, fast, bias, seed):
    """is_causal=True against the explicit mask (value and gradient), and against two oracles:
    nn.MultiheadAttention with the mask in its own convention, and F.scaled_dot_product_attention's
    own is_causal on the module's projections."""
    g = torch.Generator().manual_seed(seed)
    m = make(d=h * d_h, h=h, bias=bias, fast=fast, seed=seed)
    x = torch.randn(B, L, h * d_h, dtype=torch.float64, generator=g, requires_grad=True)
    flagged = m(x, is_causal=True)
    masked = m(x, causal(L))
    torch.testing.assert_close(flagged, masked, rtol=1e-12, atol=1e-12)
    theirs = to_torch_mha(m)(x, x, x, attn_mask=mha_mask(causal(L), h), need_weights=False)[0]
    torch.testing.assert_close(flagged, theirs, rtol=1e-9, atol=1e-11)
    split = [W(x).view(B, L, h, d_h).transpose(1, 2) for W in (m.W_q, m.W_k, m.W_v)]
    by_sdpa = m.W_o(F.scaled_dot_product_attention(*split, is_causal=True).transpose(1, 2).reshape(B, L, h * d_h))
    torch.testing.assert_close(flagged, by_sdpa, rtol=1e-9, atol=1e-11)
    grad = torch.randn(flagged.shape, dtype=torch.float64, generator=g)
    (g_flag,) = torch.autograd.grad(flagged, x, grad)
    (g_mask,) = torch.autograd.grad(masked, x, grad)
    torch.testing.assert_close(g_flag, g_mask, rtol=1e-10, atol=1e-12)


def test_is_causal_does_not_change_the_default_call():
    """The catalog's forward(x, mask=None) still works positionally, and is_causal=False is no mask."""
    m = make()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, None, False), m(x))
    assert not torch.allclose(m(x, is_causal=True), m(x))


@needs_cuda
def test_cuda_is_causal_in_bfloat16_reaches_flash_attention_and_a_mask_does_not():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    m = make(d=128, h=2, dtype=torch.bfloat16).cuda()
    x = torch.randn(2, 256, 128, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = m(x, is_causal=True)
        with pytest.raises(RuntimeError):
            m(x, causal(256).cuda())
    torch.testing.assert_close(out.float(), m(x, causal(256).cuda()).float(), rtol=2e-2, atol=2e-2)


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), L=st.integers(1, 9), h=st.sampled_from([1, 2, 4]), d_h=st.integers(1, 5),
       fast=st.booleans(), seed=st.integers(0, 2**16))
def test_property_equals_nn_multihead_attention_with_random_masks(B, L, h, d_h, fast, seed):
    g = torch.Generator().manual_seed(seed)
    m = make(d=h * d_h, h=h, fast=fast, seed=seed)
    x = torch.randn(B, L, h * d_h, dtype=torch.float64, generator=g)
    mask = torch.rand(B, 1, L, L, generator=g) < 0.7
    mask[..., 0] = True  # nn.MultiheadAttention gives NaN for a query with no allowed key
    theirs = to_torch_mha(m)(x, x, x, attn_mask=mha_mask(mask, h), need_weights=False)[0]
    torch.testing.assert_close(m(x, mask), theirs, rtol=1e-9, atol=1e-11)


@settings(max_examples=20, deadline=None)
@given(L=st.integers(2, 9), i=st.data(), seed=st.integers(0, 2**16))
def test_property_causal_outputs_ignore_the_future(L, i, seed):
    i = i.draw(st.integers(0, L - 2))
    g = torch.Generator().manual_seed(seed)
    m = make(d=8, h=2, seed=seed)
    x = torch.randn(2, L, 8, dtype=torch.float64, generator=g)
    y = x.clone()
    y[:, i + 1:] = torch.randn(2, L - i - 1, 8, dtype=torch.float64, generator=g)
    torch.testing.assert_close(m(x, causal(L))[:, :i + 1], m(y, causal(L))[:, :i + 1])


@settings(max_examples=20, deadline=None)
@given(L=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_property_permuting_tokens_permutes_outputs_without_a_mask(L, seed):
    g = torch.Generator().manual_seed(seed)
    m = make(d=8, h=2, seed=seed)
    x = torch.randn(1, L, 8, dtype=torch.float64, generator=g)
    perm = torch.randperm(L, generator=g)
    torch.testing.assert_close(m(x[:, perm]), m(x)[:, perm])


@needs_cuda
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "explicit"])
def test_cuda_matches_cpu_float64_to_float32_tolerance(fast):
    m = make(fast=fast)
    x = torch.randn(2, 64, 16, dtype=torch.float64)
    expected = m(x, causal(64))
    gpu = make(fast=fast, dtype=torch.float32).cuda()
    gpu.load_state_dict({k: v.float() for k, v in m.state_dict().items()})
    got = gpu(x.float().cuda(), causal(64).cuda())
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.double().cpu(), expected, rtol=1e-4, atol=1e-5)


@needs_cuda
def test_cuda_half_precision_stays_close_to_float32():
    m = make(dtype=torch.float32).cuda()
    x = torch.randn(2, 128, 16, device="cuda")
    ref = m(x)
    with torch.autocast("cuda", dtype=torch.float16):
        half = m(x)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), ref, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------------------------------------
# FusedQKVSelfAttention (the stretch exercise): nn.MultiheadAttention, whose in_proj_weight is the
# same fused layout, is the oracle.


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), B=st.integers(1, 3), L=st.integers(1, 7),
       h=st.sampled_from([1, 2, 4]), d_h=st.integers(1, 4), bias=st.booleans())
def test_property_fused_qkv_equals_nn_multihead_attention(seed, B, L, h, d_h, bias):
    from mhsa_ref.chapters.ch05.reference_torch import FusedQKVSelfAttention

    torch.manual_seed(seed)
    d = h * d_h
    mha = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=torch.float64).eval()
    fused = FusedQKVSelfAttention(d, h, bias=bias).double().eval()
    assert sorted(n for n, _ in fused.named_children()) == ["W_o", "qkv"]
    with torch.no_grad():
        fused.qkv.weight.copy_(mha.in_proj_weight)
        fused.W_o.weight.copy_(mha.out_proj.weight)
        if bias:
            fused.qkv.bias.copy_(mha.in_proj_bias)
            fused.W_o.bias.copy_(mha.out_proj.bias)
        x = torch.randn(B, L, d, dtype=torch.float64)
        x_before = x.clone()
        want = mha(x, x, x, need_weights=False)[0]
        mask = torch.tril(torch.ones(L, L, dtype=torch.bool))
        want_causal = mha(x, x, x, attn_mask=~mask, need_weights=False)[0]
        torch.testing.assert_close(fused(x), want, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(fused(x, mask), want_causal, rtol=1e-10, atol=1e-12)
    assert torch.equal(x, x_before)


def test_fused_qkv_bad_sizes_name_the_arguments():
    from mhsa_ref.chapters.ch05.reference_torch import FusedQKVSelfAttention

    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        FusedQKVSelfAttention(10, 3)
    with pytest.raises(ValueError, match=r"x must have shape \(B, L, d_model=8\)"):
        FusedQKVSelfAttention(8, 2)(torch.randn(2, 3, 6))
