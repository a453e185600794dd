"""Tests for the chapter-10 reference code: ``patchify``/``unpatchify`` (NumPy) and
``attention_rollout`` (PyTorch).

Evidence independent of the code under test:

1. ``patchify`` against a loop over pixels written from the definition (patch n at grid row
   n // (W/p), column n % (W/p); entry (i * p + j) * C + c is channel c of pixel (i, j)), and
   against ``torch.nn.functional.unfold``, which cuts the same patches but flattens each in
   (C, p, p) order and puts patches last: permuted, the two agree.
2. Hypothesis properties on random shapes: the round trip through ``unpatchify``, the output
   shape, every pixel exactly once, patch n equal to its slice of the image.
3. ``attention_rollout`` against a loop over layers written from Abnar & Zuidema (2020), rows
   that sum to 1, identity attention giving the identity, one layer giving that layer's Â, the
   order of the product (last layer on the left), and a real TinyTransformer's maps.
4. Validation: bad arguments raise errors naming the argument and its shape; inputs unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhsa_ref.chapters.ch10.reference import patchify, unpatchify
from mhsa_ref.chapters.ch10.reference_torch import attention_rollout

F = torch.nn.functional


def patchify_by_pixels(images, p):
    """Straight from the definition, one number at a time."""
    B, C, H, W = images.shape
    gw = W // p
    out = np.zeros((B, (H // p) * gw, p * p * C))
    for b in range(B):
        for n in range(out.shape[1]):
            for i in range(p):
                for j in range(p):
                    for c in range(C):
                        out[b, n, (i * p + j) * C + c] = images[b, c, (n // gw) * p + i, (n % gw) * p + j]
    return out


def patchify_by_unfold(images, p):
    """torch's unfold gives (B, C*p*p, N) in (C, p, p) order: move C last, patches first."""
    B, C, H, W = images.shape
    cols = F.unfold(torch.from_numpy(images), kernel_size=p, stride=p)  # (B, C*p*p, N)
    return cols.reshape(B, C, p, p, -1).permute(0, 4, 2, 3, 1).reshape(B, -1, p * p * C).numpy()


SHAPES = [(1, 1, 4, 4, 2), (1, 3, 4, 6, 2), (2, 2, 6, 4, 2), (1, 2, 6, 9, 3), (2, 3, 2, 3, 1), (2, 3, 4, 4, 4)]


@pytest.mark.parametrize("B, C, H, W, p", SHAPES)
def test_patchify_matches_the_pixel_loop_and_torch_unfold(B, C, H, W, p):
    images = np.random.default_rng(B * 100 + H * 10 + W).normal(size=(B, C, H, W))
    got = patchify(images, p)
    assert got.dtype == np.float64 and got.shape == (B, (H // p) * (W // p), p * p * C)
    np.testing.assert_array_equal(got, patchify_by_pixels(images, p))
    np.testing.assert_array_equal(got, patchify_by_unfold(images, p))


def test_patchify_on_a_small_labelled_image():
    """Written out by hand: one 2-channel 2x4 image whose pixel values name their place (c, row, col)."""
    c, r, w = np.meshgrid(np.arange(2), np.arange(2), np.arange(4), indexing="ij")
    images = (100 * c + 10 * r + w)[None].astype(float)  # (1, 2, 2, 4)
    got = patchify(images, 2)
    assert got.tolist() == [[
        [0, 100, 1, 101, 10, 110, 11, 111],  # left patch: (0,0), (0,1), (1,0), (1,1), channels together
        [2, 102, 3, 103, 12, 112, 13, 113],  # right patch
    ]]


@st.composite
def image_batches(draw):
    p = draw(st.integers(1, 4))
    B, C, gh, gw = (draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).normal(size=(B, C, gh * p, gw * p)), p


@settings(max_examples=60, deadline=None)
@given(image_batches())
def test_patchify_properties(batch):
    images, p = batch
    B, C, H, W = images.shape
    before = images.copy()
    got = patchify(images, p)
    np.testing.assert_array_equal(images, before)  # never modified
    assert got.shape == (B, (H // p) * (W // p), p * p * C)
    np.testing.assert_array_equal(unpatchify(got, (C, H, W), p), images)  # the round trip
    np.testing.assert_array_equal(np.sort(got, axis=None), np.sort(images, axis=None))  # every pixel once
    gw = W // p
    for n in range(got.shape[1]):  # patch n is the square at grid row n // gw, column n % gw
        square = images[:, :, (n // gw) * p:(n // gw + 1) * p, (n % gw) * p:(n % gw + 1) * p]
        np.testing.assert_array_equal(got[:, n], np.moveaxis(square, 1, -1).reshape(B, -1))


@settings(max_examples=30, deadline=None)
@given(image_batches())
def test_unpatchify_inverts_patchify_from_the_patches_side(batch):
    images, p = batch
    B, C, H, W = images.shape
    patches = np.random.default_rng(0).normal(size=patchify(images, p).shape)
    np.testing.assert_array_equal(patchify(unpatchify(patches, (C, H, W), p), p), patches)


def test_patchify_of_views_and_fortran_arrays_is_by_index_not_by_memory():
    rng = np.random.default_rng(4)
    base = rng.normal(size=(2, 3, 8, 12))
    for images in (base[:, :, ::2, ::2], np.asfortranarray(base), base.transpose(0, 1, 3, 2), base[:, ::-1]):
        np.testing.assert_array_equal(patchify(images, 2), patchify_by_pixels(np.ascontiguousarray(images), 2))
    assert patchify(np.zeros((0, 3, 4, 4)), 2).shape == (0, 4, 12)  # an empty batch is still a batch


def test_patchify_accepts_lists_ints_and_cpu_tensors_and_returns_new_float64():
    ints = np.arange(2 * 4 * 4).reshape(1, 2, 4, 4)
    want = patchify_by_pixels(ints.astype(float), 2)
    for images in (ints, ints.tolist(), torch.from_numpy(ints.astype(np.float32))):
        got = patchify(images, 2)
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    images = np.zeros((1, 1, 2, 2))
    patchify(images, 2)[0, 0, 0] = 7.0
    assert images[0, 0, 0, 0] == 0.0, "the output must not be a view of the input"
    assert patchify(np.int64(2) * np.ones((1, 1, 4, 4)), np.int64(2)).shape == (1, 4, 4)


@pytest.mark.parametrize("images, p, error, words", [
    (np.zeros((1, 3, 5, 4)), 2, ValueError, ["H=5", "W=4", "(1, 3, 5, 4)", "patch_size=2"]),
    (np.zeros((1, 3, 4, 6)), 4, ValueError, ["W=6", "(1, 3, 4, 6)", "patch_size=4"]),
    (np.zeros((3, 4, 4)), 2, ValueError, ["(B, C, H, W)", "(3, 4, 4)"]),
    (np.zeros((1, 1, 3, 4, 4)), 2, ValueError, ["(B, C, H, W)", "(1, 1, 3, 4, 4)"]),
    (np.zeros((1, 1, 4, 4)), 0, ValueError, ["patch_size", "0"]),
    (np.zeros((1, 1, 4, 4)), -2, ValueError, ["patch_size", "-2"]),
    (np.zeros((1, 1, 4, 4)), 2.0, TypeError, ["patch_size", "float"]),
    (np.zeros((1, 1, 4, 4)), True, TypeError, ["patch_size", "bool"]),
    (np.zeros((1, 1, 4, 4), dtype=complex), 2, TypeError, ["images", "complex"]),
    (np.zeros((1, 1, 4, 4), dtype=bool), 2, TypeError, ["images", "bool"]),
    (np.zeros((1, 0, 4, 4)), 2, ValueError, ["images", "(1, 0, 4, 4)"]),
    (np.zeros((1, 1, 0, 4)), 2, ValueError, ["images", "(1, 1, 0, 4)"]),
    ([[[[1.0, 2.0], [3.0]]]], 1, TypeError, ["images", "array-like"]),
])
def test_patchify_errors_name_the_argument_and_shape(images, p, error, words):
    with pytest.raises(error) as info:
        patchify(images, p)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("patches, shape, p, words", [
    (np.zeros((1, 4, 4)), (1, 4, 4), 3, ["image_shape", "H=4", "patch_size=3"]),
    (np.zeros((1, 4, 5)), (1, 4, 4), 2, ["patches", "(B, 4, 4)", "(1, 4, 5)"]),
    (np.zeros((4, 4)), (1, 4, 4), 2, ["patches", "(4, 4)"]),
    (np.zeros((1, 4, 4)), (4, 4), 2, ["image_shape", "(C, H, W)"]),
    (np.zeros((1, 4, 4)), (0, 4, 4), 2, ["image_shape", "positive"]),
])
def test_unpatchify_errors_name_the_argument_and_shape(patches, shape, p, words):
    with pytest.raises(ValueError) as info:
        unpatchify(patches, shape, p)
    for word in words:
        assert word in str(info.value)


# ---------------------------------------------------------------------------------------------
# attention_rollout


def rollout_by_loops(weights):
    """Abnar & Zuidema (2020), one batch element and one entry at a time, in float64."""
    B, h, L, _ = weights[0].shape
    out = np.zeros((B, L, L))
    for b in range(B):
        r = np.eye(L)
        for a in weights:
            a_hat = np.zeros((L, L))
            for i in range(L):
                for j in range(L):
                    a_hat[i, j] = 0.5 * sum(float(a[b, k, i, j]) for k in range(h)) / h + 0.5 * (i == j)
                a_hat[i] /= a_hat[i].sum()
            new = np.zeros((L, L))
            for i in range(L):  # new = a_hat @ r: the layer above reads the mixture below
                for j in range(L):
                    new[i, j] = sum(a_hat[i, m] * r[m, j] for m in range(L))
            r = new
        out[b] = r
    return out


def random_maps(seed, n_layers, B, h, L, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.softmax(2 * torch.randn(B, h, L, L, generator=g, dtype=dtype), dim=-1) for _ in range(n_layers)]


@pytest.mark.parametrize("n_layers, B, h, L", [(1, 1, 1, 3), (2, 2, 3, 4), (3, 1, 2, 5)])
def test_rollout_matches_the_loop(n_layers, B, h, L):
    maps = random_maps(n_layers * 7 + L, n_layers, B, h, L)
    got = attention_rollout(maps)
    assert got.shape == (B, L, L) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), rollout_by_loops(maps), rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.integers(1, 7), st.integers(0, 10**6))
def test_rollout_rows_sum_to_one_and_stay_non_negative(n_layers, B, h, L, seed):
    got = attention_rollout(random_maps(seed, n_layers, B, h, L, torch.float32))
    assert got.dtype == torch.float32 and got.shape == (B, L, L)
    torch.testing.assert_close(got.sum(-1), torch.ones(B, L), rtol=0, atol=1e-5)
    assert (got >= 0).all()


def test_rollout_of_identity_maps_is_the_identity_and_one_layer_is_its_a_hat():
    eye = torch.eye(4).expand(2, 3, 4, 4)
    torch.testing.assert_close(attention_rollout([eye, eye, eye]), torch.eye(4).expand(2, 4, 4))
    uniform = torch.full((1, 2, 4, 4), 0.25)  # every head spreads evenly: Â = 0.5 * 1/4 + 0.5 * I
    want = 0.125 + 0.5 * torch.eye(4)
    torch.testing.assert_close(attention_rollout([uniform])[0], want)


def test_rollout_multiplies_the_last_layer_on_the_left():
    first, second = random_maps(3, 2, 1, 1, 4)
    a_hat = [0.5 * a.mean(1) + 0.5 * torch.eye(4) for a in (first, second)]
    torch.testing.assert_close(attention_rollout([first, second]), a_hat[1] @ a_hat[0])
    assert not torch.allclose(a_hat[1] @ a_hat[0], a_hat[0] @ a_hat[1]), "the order must matter in this test"


def test_rollout_renormalises_rows_of_masked_maps():
    """A padded query row is all zeros in InspectableAttention: Â's row is then 0.5 * e_i, renormalised."""
    maps = random_maps(5, 2, 1, 2, 4)
    maps[0][:, :, 3] = 0.0
    got = attention_rollout(maps)
    torch.testing.assert_close(got.sum(-1), torch.ones(1, 4, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), rollout_by_loops(maps), rtol=1e-12)


def test_rollout_of_a_tiny_transformer_and_inputs_unchanged():
    from mhsa_ref.chapters.ch06.inspectable import TinyTransformer

    torch.manual_seed(0)
    model = TinyTransformer(16, 2, 3, max_len=10, d_input=12).eval()
    with torch.no_grad():
        model(torch.randn(2, 10, 12))
    maps = model.attention_maps()
    before = [m.clone() for m in maps]
    got = attention_rollout(maps)
    assert got.shape == (2, 10, 10)
    np.testing.assert_allclose(got.double().numpy(), rollout_by_loops([m.double() for m in maps]), rtol=1e-5, atol=1e-6)
    for m, b in zip(maps, before):
        assert torch.equal(m, b)


@pytest.mark.parametrize("weights, error, words", [
    ([], TypeError, ["non-empty list"]),
    (torch.ones(1, 1, 2, 2), TypeError, ["list", "Tensor"]),
    ([np.ones((1, 1, 2, 2))], TypeError, ["weights[0]", "ndarray"]),
    ([torch.ones(1, 1, 2, 2, dtype=torch.long)], TypeError, ["weights[0]", "floating"]),
    ([torch.ones(1, 2, 2)], ValueError, ["weights[0]", "(B, h, L, L)", "(1, 2, 2)"]),
    ([torch.ones(1, 1, 2, 3)], ValueError, ["weights[0]", "(1, 1, 2, 3)"]),
    ([torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)], ValueError, ["weights[1]", "(1, 1, 3, 3)", "(1, 1, 2, 2)"]),
    ([torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2, dtype=torch.float64)], TypeError, ["weights[1]", "float64"]),
    ((m for m in [torch.ones(1, 1, 2, 2)]), TypeError, ["list", "generator"]),
])
def test_rollout_errors_name_the_argument_and_shape(weights, error, words):
    with pytest.raises(error) as info:
        attention_rollout(weights)
    for word in words:
        assert word in str(info.value)
