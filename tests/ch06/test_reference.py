"""Chapter 06's reference, checked against independent oracles: nn.LayerNorm and
nn.TransformerEncoderLayer, plus properties of normalization and of the residual path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch import nn

from mhsa_ref.chapters.ch06.reference_torch import TransformerBlock, to_torch_encoder_layer
from mhsa_ref.chapters.ch06.reference import layer_norm, layer_norm_backward, sinusoidal_positions
from mhsa_ref.chapters.ch05.reference_torch import mha_mask


def test_layer_norm_equals_nn_layernorm():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, (2, 5, 7))
    ln = nn.LayerNorm(7, eps=1e-3, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.copy_(torch.from_numpy(rng.normal(1.0, 0.5, 7)))
        ln.bias.copy_(torch.from_numpy(rng.normal(0.0, 0.5, 7)))
    expected = ln(torch.from_numpy(x)).detach().numpy()
    got = layer_norm(x, ln.weight.detach().numpy(), ln.bias.detach().numpy(), eps=1e-3)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert got.dtype == np.float64


@settings(max_examples=40, deadline=None)
@given(x=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 9)),
                elements=st.floats(-1e3, 1e3, allow_nan=False)),
       eps=st.sampled_from([1e-5, 1e-2, 1.0]))
def test_property_layer_norm_equals_torch(x, eps):
    d = x.shape[-1]
    gamma, beta = np.linspace(0.5, 2.0, d), np.linspace(-1.0, 1.0, d)
    expected = F.layer_norm(torch.from_numpy(x), (d,), torch.from_numpy(gamma), torch.from_numpy(beta), eps)
    np.testing.assert_allclose(layer_norm(x, gamma, beta, eps), expected.numpy(), rtol=1e-9, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.float64, (3, 6), elements=st.floats(-100, 100, allow_nan=False)),
       scale=st.floats(0.01, 100), shift=st.floats(-100, 100))
def test_property_layer_norm_ignores_scale_and_shift_of_each_vector(x, scale, shift):
    x = x + np.arange(6)  # no constant rows: their variance is 0 and eps decides
    ones, zeros = np.ones(6), np.zeros(6)
    np.testing.assert_allclose(layer_norm(scale * x + shift, ones, zeros, eps=0.0),
                               layer_norm(x, ones, zeros, eps=0.0), rtol=1e-7, atol=1e-7)
    out = layer_norm(x, ones, zeros, eps=0.0)
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(out.var(-1), 1.0, rtol=1e-9)


def test_layer_norm_constant_vector_gives_beta_and_leaves_inputs_alone():
    x, gamma, beta = np.full((2, 4), 3.0), np.full(4, 2.0), np.arange(4.0)
    copies = [a.copy() for a in (x, gamma, beta)]
    np.testing.assert_array_equal(layer_norm(x, gamma, beta), np.broadcast_to(beta, (2, 4)))
    for a, b in zip((x, gamma, beta), copies):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("args, match", [
    ((np.ones((2, 4)), np.ones(3), np.zeros(4)), r"gamma must have shape \(d,\) = \(4,\) to match x of shape \(2, 4\), got \(3,\)"),
    ((np.ones((2, 4)), np.ones(4), np.zeros((1, 4))), r"beta must have shape"),
    ((np.ones((2, 4)), np.ones(4), np.zeros(4), -1.0), r"eps must be a number >= 0"),
    ((np.float64(3.0), np.ones(1), np.zeros(1)), r"x must have at least 1 dimensions"),
    ((np.array(["a"]), np.ones(1), np.zeros(1)), r"x must hold real numbers"),
])
def test_layer_norm_bad_input_gets_a_clear_error(args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        layer_norm(*args)


def _block(norm_first, d=16, h=4, d_ff=32, seed=0):
    torch.manual_seed(seed)
    block = TransformerBlock(d, h, d_ff, norm_first=norm_first).double()
    with torch.no_grad():  # LayerNorm starts at gamma=1, beta=0: make every parameter count
        for p in block.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return block


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-ln", "post-ln"])
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "causal"])
def test_block_equals_transformer_encoder_layer_in_value_and_gradient(norm_first, masked):
    block = _block(norm_first)
    layer = to_torch_encoder_layer(block)
    assert layer.norm_first == norm_first and layer.activation is F.gelu
    mask = torch.tril(torch.ones(6, 6, dtype=torch.bool)) if masked else None
    x1 = torch.randn(3, 6, 16, dtype=torch.float64, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    ours = block(x1, mask)
    theirs = layer(x2, src_mask=None if mask is None else mha_mask(mask, 4))
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    g = torch.randn_like(ours)
    ours.backward(g)
    theirs.backward(g)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(block.ff[0].weight.grad, layer.linear1.weight.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(block.ln2.weight.grad, layer.norm2.weight.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-ln", "post-ln"])
def test_block_equals_encoder_layer_fast_inference_path(norm_first):
    # In eval mode without grad, nn.TransformerEncoderLayer takes a fused native path (float32).
    block = _block(norm_first).float().eval()
    layer = to_torch_encoder_layer(block).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(block(x), layer(x), rtol=1e-4, atol=1e-5)


def test_pre_ln_residual_path_is_the_identity_when_the_sublayers_are_silent():
    pre, post = _block(True), _block(False)
    for block in (pre, post):
        with torch.no_grad():  # sublayers whose outputs are zero
            for lin in (block.attn.W_o, block.ff[2]):
                lin.weight.zero_()
                lin.bias.zero_()
    x = torch.randn(2, 5, 16, dtype=torch.float64) * 3 + 1
    torch.testing.assert_close(pre(x), x)  # Pre-LN: nothing on the highway normalizes x
    expected = post.ln2(post.ln1(x))  # Post-LN: every block's output goes through the norms
    torch.testing.assert_close(post(x), expected)


def test_block_dropout_only_in_training_and_state_dict_is_the_contracts():
    torch.manual_seed(0)
    block = TransformerBlock(8, 2, 16, dropout=0.5).double()
    names = {n.rsplit(".", 1)[0] for n in block.state_dict()}
    assert names == {"attn.W_q", "attn.W_k", "attn.W_v", "attn.W_o", "ln1", "ln2", "ff.0", "ff.2"}
    assert isinstance(block.ff[1], nn.GELU) and block.ff[1].approximate == "none"
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    block.train()
    assert not torch.allclose(block(x), block(x))
    block.eval()
    assert torch.equal(block(x), block(x))


def test_block_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match=r"d_ff must be a positive int, got d_ff=0"):
        TransformerBlock(8, 2, 0)
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=4"):
        TransformerBlock(10, 4, 16)


# ---------------------------------------------------------------------------------------------
# sinusoidal_positions: the paper's formula through another route (complex exponentials, the
# paper's Vaswani et al. section 3.5 values written out), and the relative-offset property.


def test_sinusoidal_positions_written_out():
    """Values of section 3.5's formula computed by hand for d = 4: frequencies 1 and 1/100."""
    pe = sinusoidal_positions(3, 4)
    want = np.array([[0.0, 1.0, 0.0, 1.0],
                     [np.sin(1.0), np.cos(1.0), np.sin(0.01), np.cos(0.01)],
                     [np.sin(2.0), np.cos(2.0), np.sin(0.02), np.cos(0.02)]])
    np.testing.assert_allclose(pe, want, rtol=0, atol=1e-15)
    assert pe.dtype == np.float64


@settings(max_examples=40, deadline=None)
@given(L=st.integers(0, 64), half=st.integers(1, 32))
def test_property_sinusoidal_equals_complex_exponential(L, half):
    d = 2 * half
    z = np.exp(1j * np.outer(np.arange(L), np.logspace(0, -(d - 2) / d * 4, half)))  # 10000 = 1e4
    pe = sinusoidal_positions(L, d)
    assert pe.shape == (L, d)
    np.testing.assert_allclose(pe[:, 0::2], z.imag, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pe[:, 1::2], z.real, rtol=0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 16), k=st.integers(1, 20), p=st.integers(0, 40))
def test_property_offset_is_a_fixed_rotation(half, k, p):
    """PE[p + k] = R_k PE[p], with R_k a 2x2 rotation per pair that does not depend on p."""
    d = 2 * half
    pe = sinusoidal_positions(p + k + 1, d)
    omega = 10000.0 ** (-np.arange(half) * 2 / d)
    c, s = np.cos(k * omega), np.sin(k * omega)
    sin_p, cos_p = pe[p, 0::2], pe[p, 1::2]
    np.testing.assert_allclose(pe[p + k, 0::2], sin_p * c + cos_p * s, atol=1e-12)
    np.testing.assert_allclose(pe[p + k, 1::2], cos_p * c - sin_p * s, atol=1e-12)


@pytest.mark.parametrize("L, d, word", [(4, 5, "d=5"), (4, 0, "d"), (-1, 4, "L"), (2.0, 4, "L"),
                                        (True, 4, "L"), (4, "8", "d")])
def test_sinusoidal_positions_bad_input_names_the_argument(L, d, word):
    with pytest.raises(ValueError, match=word):
        sinusoidal_positions(L, d)


# layer_norm_backward (the stretch exercise): autograd through F.layer_norm in float64 is the oracle.


def _autograd_ln_backward(x, gamma, grad_out, eps):
    xt = torch.tensor(x, requires_grad=True)
    F.layer_norm(xt, (x.shape[-1],), torch.tensor(gamma), None, eps).backward(torch.tensor(grad_out))
    return xt.grad.numpy()


@settings(max_examples=40, deadline=None)
@given(x=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 9)),
                elements=st.floats(-50, 50, allow_nan=False)),
       eps=st.sampled_from([1e-5, 1e-2, 0.5]), seed=st.integers(0, 2**32 - 1))
def test_property_layer_norm_backward_equals_autograd_and_leaves_inputs_alone(x, eps, seed):
    rng = np.random.default_rng(seed)
    d = x.shape[-1]
    gamma, grad_out = 1 + 0.5 * rng.standard_normal(d), rng.standard_normal(x.shape)
    before = [a.copy() for a in (x, gamma, grad_out)]
    got = layer_norm_backward(x, gamma, grad_out, eps)
    want = _autograd_ln_backward(x, gamma, grad_out, eps)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * scale)
    for a, b in zip((x, gamma, grad_out), before):
        np.testing.assert_array_equal(a, b)


def test_layer_norm_backward_carries_one_over_the_scale():
    # LayerNorm ignores the scale of x (up to eps), so a loss cannot push along x itself, and a
    # 100 times larger x receives a 100 times smaller gradient.
    rng = np.random.default_rng(3)
    x, gamma, g = rng.normal(size=(5, 16)), 1 + 0.3 * rng.normal(size=16), rng.normal(size=(5, 16))
    small, large = layer_norm_backward(x, gamma, g, 0.0), layer_norm_backward(100 * x, gamma, g, 0.0)
    np.testing.assert_allclose(large * 100, small, rtol=1e-10)
    np.testing.assert_allclose((small * x).sum(axis=-1), 0.0, atol=1e-10)
    np.testing.assert_allclose(small.sum(axis=-1), 0.0, atol=1e-10)


@pytest.mark.parametrize("args, match", [
    ((np.ones((2, 4)), np.ones(3), np.ones((2, 4))), r"gamma must have shape \(d,\) = \(4,\)"),
    ((np.ones((2, 4)), np.ones(4), np.ones((2, 3))), r"grad_out must have the shape of x \(2, 4\)"),
    ((np.ones((2, 4)), np.ones(4), np.ones((2, 4)), -1.0), "eps must be a number >= 0"),
])
def test_layer_norm_backward_bad_input_names_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        layer_norm_backward(*args)
