"""Tests for the chapter-01 reference maths in ``mhsa_ref.chapters.ch01.reference``.

Three kinds of evidence, each independent of the code under test:

1. PyTorch as an oracle: ``torch.nn.functional.scaled_dot_product_attention`` and
   ``torch.softmax`` in float64. The oracle's attention weights are read off by running torch
   with V = identity (then out == weights), so they are never recomputed with the reference's
   own formula.
2. Hypothesis properties that any correct attention must have (rows sum to 1, permutation
   equivariance, shift invariance, masked keys are ignored, inputs untouched, float64 out).
3. Error messages: bad shapes and dtypes raise ValueError/TypeError naming the argument and
   the offending shape, so a learner sees what they passed.

A final section covers edge cases: zero keys, empty softmax axes, NaN inputs.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import torch  # noqa: E402  (the oracle: a missing torch must fail these tests, not skip them)

import hypothesis.extra.numpy as hnp  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mhsa_ref.chapters.ch01.reference import scaled_dot_product_attention, self_attention, softmax  # noqa: E402

F = torch.nn.functional

# float64 throughout; logits stay well below 1e3 in every test, so agreement to ~1e-10 is
# far tighter than any real mistake (wrong scale, wrong axis, leaked mask) could meet.
RTOL = 1e-10
ATOL = 1e-12


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _t(a: np.ndarray) -> "torch.Tensor":
    """NumPy -> torch on a private, writable, contiguous copy (broadcast views are read-only)."""
    return torch.from_numpy(np.array(a, copy=True))


def torch_attention(Q, K, V, mask=None):
    """(out, weights) from PyTorch's SDPA, the independent oracle.

    Batch axes are broadcast explicitly with NumPy first so we rely only on torch's documented
    (..., L, E) behaviour. Weights come from a second call with V = I_Lk: out = weights @ I.
    """
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (Lq, dk), (Lk, dv) = Q.shape[-2:], V.shape[-2:]
    q = _t(np.broadcast_to(Q, batch + (Lq, dk)))
    k = _t(np.broadcast_to(K, batch + (Lk, dk)))
    v = _t(np.broadcast_to(V, batch + (Lk, dv)))
    eye = _t(np.broadcast_to(np.eye(Lk), batch + (Lk, Lk)))
    m = None if mask is None else _t(np.broadcast_to(mask, batch + (Lq, Lk)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m).numpy()
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=m).numpy()
    return out, weights


def reference_no_warnings(*args, **kwargs):
    """Call the reference with warnings as errors: no 'invalid value' or overflow is allowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return scaled_dot_product_attention(*args, **kwargs)


def check_against_torch(Q, K, V, mask=None):
    """Compare reference with torch on rows that have an allowed key; others must be exact 0."""
    out, weights = reference_no_warnings(Q, K, V, mask)
    t_out, t_weights = torch_attention(Q, K, V, mask)
    full = t_weights.shape
    assert out.shape == t_out.shape
    # weights may omit batch axes that only V carries (they cannot depend on V); compare them
    # broadcast to the full (batch..., Lq, Lk) shape.
    assert weights.shape[-2:] == full[-2:]
    weights = np.broadcast_to(weights, full)
    assert weights.dtype == out.dtype == np.float64

    if mask is None:
        live = np.ones(full[:-1], dtype=bool)
    else:
        live = np.broadcast_to(mask, full).any(axis=-1)
    # torch may return NaN on fully-masked rows, so compare only the live ones against it.
    np.testing.assert_allclose(weights[live], t_weights[live], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out[live], t_out[live], rtol=RTOL, atol=1e-10)
    # Our documented convention for a query with no allowed key: exact zeros, never NaN.
    assert np.all(weights[~live] == 0.0)
    assert np.all(out[~live] == 0.0)
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    return out, weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------------------
# 1. PyTorch as oracle
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape",
    [
        ((4, 8), (4, 8), (4, 8)),  # plain self-attention sizes
        ((3, 4), (6, 4), (6, 4)),  # Lq != Lk
        ((3, 4), (6, 4), (6, 7)),  # d_k != d_v
        ((1, 5), (1, 5), (1, 2)),  # single query, single key: weight must be exactly 1
        ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)),  # batch and heads
    ],
)
def test_matches_torch_without_mask(q_shape, k_shape, v_shape):
    rng = _rng(0)
    Q, K, V = (rng.standard_normal(s) for s in (q_shape, k_shape, v_shape))
    check_against_torch(Q, K, V)


def test_matches_torch_is_causal_flag():
    """A tril mask must agree with torch's own causal mode (built without our mask at all)."""
    rng = _rng(1)
    Q, K, V = rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 3))
    causal = np.tril(np.ones((5, 5), dtype=bool))
    out, weights = reference_no_warnings(Q, K, V, causal)
    t_out = F.scaled_dot_product_attention(_t(Q), _t(K), _t(V), is_causal=True).numpy()
    t_w = F.scaled_dot_product_attention(
        _t(Q), _t(K), _t(np.broadcast_to(np.eye(5), (2, 5, 5))), is_causal=True
    ).numpy()
    np.testing.assert_allclose(out, t_out, rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(weights, t_w, rtol=RTOL, atol=ATOL)
    assert np.all(weights[..., ~causal] == 0.0)  # no peeking at future tokens


def _masks(Lq: int, Lk: int, batch: tuple[int, ...], rng: np.random.Generator):
    """Causal, key-padding and random boolean masks in several broadcastable shapes."""
    padding = np.arange(Lk) < Lk - 2  # last two keys are padding
    return {
        "causal (Lq,Lk)": np.tril(np.ones((Lq, Lk), dtype=bool)),
        "padding (Lk,)": padding,
        "padding (1,Lk)": padding[None, :],
        "random (Lq,Lk)": rng.random((Lq, Lk)) < 0.6,
        "random full": rng.random(batch + (Lq, Lk)) < 0.6,
        "per-batch padding (B,1,1,Lk)": rng.random(batch[:1] + (1,) * (len(batch) - 1) + (1, Lk)) < 0.7,
        "scalar True": np.array(True),
    }


@pytest.mark.parametrize(
    "name", list(_masks(5, 6, (2, 3), _rng(0)).keys())
)
def test_matches_torch_with_boolean_masks(name):
    rng = _rng(2)
    batch, Lq, Lk = (2, 3), 5, 6
    Q = rng.standard_normal(batch + (Lq, 4))
    K = rng.standard_normal(batch + (Lk, 4))
    V = rng.standard_normal(batch + (Lk, 3))
    mask = _masks(Lq, Lk, batch, rng)[name]
    check_against_torch(Q, K, V, mask)


def test_fully_masked_rows_are_exact_zeros_and_others_match_torch():
    """Rows 0 and 3 see no key at all: reference gives zeros (not NaN); the rest match torch."""
    rng = _rng(3)
    Q, K, V = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    mask = rng.random((2, 4, 5)) < 0.5
    mask[:, 0, :] = False
    mask[1, 3, :] = False
    mask[0, 1, :] = True  # make sure some rows are live
    out, weights = check_against_torch(Q, K, V, mask)
    assert np.array_equal(weights[:, 0], np.zeros((2, 5)))
    assert np.array_equal(out[1, 3], np.zeros(2))


def test_everything_masked_gives_zeros_everywhere():
    rng = _rng(4)
    Q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    out, weights = reference_no_warnings(Q, K, V, np.zeros((3, 5), dtype=bool))
    assert np.array_equal(out, np.zeros((3, 2)))
    assert np.array_equal(weights, np.zeros((3, 5)))


@pytest.mark.parametrize(
    "mask_shape",
    [None, (6,), (1, 6), (3, 6), (2, 1, 1, 6), (1, 5, 3, 6), (2, 5, 3, 6)],
)
def test_matches_torch_with_broadcast_batch_axes(mask_shape):
    """Q (2,1,3,4), K (1,5,6,4), V (5,6,7): batch axes broadcast to (2,5), ranks differ."""
    rng = _rng(5)
    Q = rng.standard_normal((2, 1, 3, 4))
    K = rng.standard_normal((1, 5, 6, 4))
    V = rng.standard_normal((5, 6, 7))
    mask = None if mask_shape is None else rng.random(mask_shape) < 0.7
    out, weights = check_against_torch(Q, K, V, mask)
    assert out.shape == (2, 5, 3, 7)
    assert weights.shape == (2, 5, 3, 6)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_softmax_matches_torch_on_every_axis(shape):
    rng = _rng(6)
    x = rng.standard_normal(shape) * 3
    for axis in range(-len(shape), len(shape)):
        expected = torch.softmax(_t(x), dim=axis).numpy()
        np.testing.assert_allclose(softmax(x, axis=axis), expected, rtol=RTOL, atol=ATOL)


def test_softmax_default_axis_is_last():
    x = _rng(7).standard_normal((3, 4))
    np.testing.assert_array_equal(softmax(x), softmax(x, axis=-1))
    np.testing.assert_allclose(softmax(x).sum(axis=-1), 1.0, rtol=0, atol=1e-14)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_large_inputs_do_not_overflow(axis):
    """Entries of +-1000: naive exp(1000) overflows to inf; the stable version must not."""
    rng = _rng(8)
    x = rng.uniform(-1000, 1000, size=(4, 6))
    x[0, :] = 1000.0  # a row of ties at the overflow edge
    x[:, 0] = -1000.0
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.exp(x)).all()  # the naive formula really would overflow
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = softmax(x, axis=axis)
    assert np.isfinite(result).all()
    expected = torch.softmax(_t(x), dim=axis).numpy()
    np.testing.assert_allclose(result, expected, rtol=RTOL, atol=ATOL)


def test_softmax_handles_minus_inf():
    """-inf entries get weight 0 (matches torch); an all -inf slice gives zeros, not NaN."""
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = softmax(x)
    np.testing.assert_allclose(result[0], torch.softmax(_t(x[0]), dim=0).numpy(), rtol=RTOL)
    assert result[0, 1] == 0.0
    assert np.array_equal(result[1], np.zeros(3))


def test_attention_with_large_logits_matches_torch():
    """Logits of several hundred must not overflow inside attention's softmax."""
    rng = _rng(9)
    Q = rng.standard_normal((4, 8)) * 12
    K = rng.standard_normal((5, 8)) * 12
    V = rng.standard_normal((5, 3))
    scores = Q @ K.T / np.sqrt(8)
    assert np.abs(scores).max() > 200  # the test really exercises large logits
    check_against_torch(Q, K, V, np.tril(np.ones((4, 5), dtype=bool)))


# --------------------------------------------------------------------------------------------
# 2. Hypothesis properties
# --------------------------------------------------------------------------------------------

# Bounded, finite values: logits stay below ~10*10*4/2 = 200, well inside float64's range.
FINITE = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)
# database=None: no .hypothesis/ folder is written into the book's working tree.
PROPS = settings(max_examples=60, deadline=None, database=None)


@st.composite
def mask_shapes(draw, full: tuple[int, ...]):
    """Shapes that broadcast *to* ``full`` (a trailing slice with some sides set to 1).

    hnp.broadcastable_shapes is not enough: where ``full`` has a side of 1 it may draw any
    side, and such a mask would enlarge the batch rather than broadcast to it.
    """
    n = draw(st.integers(0, len(full)))
    tail = full[len(full) - n:]
    ones = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return tuple(1 if one else side for side, one in zip(tail, ones))


@st.composite
def attention_inputs(draw, with_mask: bool = True, broadcast_batch: bool = True):
    """Q, K, V (and maybe a bool mask) with small, valid, possibly broadcasting shapes."""
    Lq, Lk = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    dk, dv = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if broadcast_batch:
        shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=2, max_side=3))
        (qb, kb, vb), batch = shapes.input_shapes, shapes.result_shape
    else:
        batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
        qb = kb = vb = batch
    Q = draw(hnp.arrays(np.float64, qb + (Lq, dk), elements=FINITE))
    K = draw(hnp.arrays(np.float64, kb + (Lk, dk), elements=FINITE))
    V = draw(hnp.arrays(np.float64, vb + (Lk, dv), elements=FINITE))
    mask = None
    if with_mask and draw(st.booleans()):
        full = batch + (Lq, Lk)
        mask = draw(hnp.arrays(np.bool_, draw(mask_shapes(full))))
    return Q, K, V, mask, batch


def _full_mask(mask, shape):
    return np.ones(shape, dtype=bool) if mask is None else np.broadcast_to(mask, shape)


@PROPS
@given(attention_inputs())
def test_property_matches_torch(inputs):
    Q, K, V, mask, _ = inputs
    check_against_torch(Q, K, V, mask)


@PROPS
@given(attention_inputs())
def test_property_shapes_and_weight_rows(inputs):
    """out is (batch, Lq, dv); weights in [0, 1]; rows with an allowed key sum to 1, others 0."""
    Q, K, V, mask, batch = inputs
    Lq, Lk, dv = Q.shape[-2], K.shape[-2], V.shape[-1]
    out, weights = reference_no_warnings(Q, K, V, mask)
    assert out.shape == batch + (Lq, dv)
    # weights always end in (Lq, Lk) and line up with the broadcast batch axes
    assert weights.shape[-2:] == (Lq, Lk)
    assert np.broadcast_shapes(weights.shape, batch + (Lq, Lk)) == batch + (Lq, Lk)
    full = np.broadcast_to(weights, batch + (Lq, Lk))
    assert np.all((full >= 0.0) & (full <= 1.0))
    allowed = _full_mask(mask, full.shape)
    live = allowed.any(axis=-1)
    np.testing.assert_allclose(full.sum(axis=-1)[live], 1.0, rtol=0, atol=1e-12)
    assert np.all(full[~live] == 0.0)
    assert np.all(out[np.broadcast_to(~live[..., None], out.shape)] == 0.0)


@PROPS
@given(attention_inputs())
def test_property_masked_keys_get_exactly_zero_weight(inputs):
    Q, K, V, mask, batch = inputs
    if mask is None:
        mask = np.zeros((Q.shape[-2], K.shape[-2]), dtype=bool)  # force the interesting case
    _, weights = reference_no_warnings(Q, K, V, mask)
    full_shape = np.broadcast_shapes(weights.shape, np.shape(mask))
    w = np.broadcast_to(weights, full_shape)
    assert np.all(w[~np.broadcast_to(mask, full_shape)] == 0.0)


@PROPS
@given(attention_inputs(with_mask=False, broadcast_batch=False), st.data())
def test_property_changing_values_of_masked_keys_changes_nothing(inputs, data):
    """Keys that no query may see: their V rows (even huge ones) must not leak into out."""
    Q, K, V, _, batch = inputs
    Lq, Lk = Q.shape[-2], K.shape[-2]
    mask = data.draw(hnp.arrays(np.bool_, batch + (Lq, Lk)), label="mask")
    dead = ~mask.any(axis=-2)  # (batch..., Lk): masked for every query
    garbage = data.draw(hnp.arrays(np.float64, V.shape, elements=st.floats(-1e6, 1e6)), label="garbage")
    V2 = np.where(dead[..., None], garbage, V)
    out1, w1 = reference_no_warnings(Q, K, V, mask)
    out2, w2 = reference_no_warnings(Q, K, V2, mask)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_allclose(out1, out2, rtol=0, atol=1e-12)


@PROPS
@given(attention_inputs(with_mask=False, broadcast_batch=False), st.data())
def test_property_permuting_queries_permutes_outputs(inputs, data):
    Q, K, V, _, _ = inputs
    perm = np.array(data.draw(st.permutations(range(Q.shape[-2])), label="perm"))
    out, weights = reference_no_warnings(Q, K, V)
    out_p, weights_p = reference_no_warnings(Q[..., perm, :], K, V)
    np.testing.assert_allclose(out_p, out[..., perm, :], rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(weights_p, weights[..., perm, :], rtol=RTOL, atol=ATOL)


@PROPS
@given(attention_inputs(broadcast_batch=False), st.data())
def test_property_permuting_keys_and_values_together_leaves_out_unchanged(inputs, data):
    """Attention is a set operation over keys: reorder (K, V) and the mask's columns alike."""
    Q, K, V, mask, _ = inputs
    perm = np.array(data.draw(st.permutations(range(K.shape[-2])), label="perm"))
    mask_p = None
    if mask is not None:
        mask = np.broadcast_to(mask, Q.shape[:-2] + (Q.shape[-2], K.shape[-2]))
        mask_p = mask[..., perm]
    out, weights = reference_no_warnings(Q, K, V, mask)
    out_p, weights_p = reference_no_warnings(Q, K[..., perm, :], V[..., perm, :], mask_p)
    np.testing.assert_allclose(out_p, out, rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(weights_p, weights[..., perm], rtol=RTOL, atol=ATOL)


@PROPS
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=5),
        elements=FINITE,
    ),
    st.data(),
)
def test_property_self_attention_is_permutation_equivariant(X, data):
    """Q = K = V = X: permuting the tokens permutes the outputs, and weights on both axes."""
    perm = np.array(data.draw(st.permutations(range(X.shape[-2])), label="perm"))
    out, weights = reference_no_warnings(X, X, X)
    Xp = X[..., perm, :]
    out_p, weights_p = reference_no_warnings(Xp, Xp, Xp)
    np.testing.assert_allclose(out_p, out[..., perm, :], rtol=RTOL, atol=1e-10)
    np.testing.assert_allclose(weights_p, weights[..., perm, :][..., perm], rtol=RTOL, atol=ATOL)


@PROPS
@given(attention_inputs(), st.data())
def test_property_adding_a_vector_to_every_key_changes_nothing(inputs, data):
    """K + c adds q.c/sqrt(dk) to every logit of row q, a per-row constant softmax ignores."""
    Q, K, V, mask, _ = inputs
    c = data.draw(hnp.arrays(np.float64, (K.shape[-1],), elements=FINITE), label="c")
    out, weights = reference_no_warnings(Q, K, V, mask)
    out_c, weights_c = reference_no_warnings(Q, K + c, V, mask)
    np.testing.assert_allclose(weights_c, weights, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(out_c, out, rtol=1e-9, atol=1e-9)


@st.composite
def softmax_inputs(draw, bound: float = 1e3):
    x = draw(
        hnp.arrays(
            np.float64,
            hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
            elements=st.floats(-bound, bound, allow_nan=False, allow_infinity=False),
        )
    )
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    return x, axis


@PROPS
@given(softmax_inputs(), st.data())
def test_property_softmax_shift_invariance(x_axis, data):
    """softmax(x + c) == softmax(x) for any c constant along the axis (different per slice)."""
    x, axis = x_axis
    c_shape = list(x.shape)
    c_shape[axis] = 1
    c = data.draw(
        hnp.arrays(np.float64, tuple(c_shape), elements=st.floats(-1e3, 1e3)), label="c"
    )
    np.testing.assert_allclose(softmax(x + c, axis=axis), softmax(x, axis=axis), rtol=1e-9, atol=1e-12)


@PROPS
@given(softmax_inputs())
def test_property_softmax_is_a_distribution_and_matches_torch(x_axis):
    x, axis = x_axis
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = softmax(x, axis=axis)
    assert p.shape == x.shape and p.dtype == np.float64
    assert np.all((p >= 0.0) & (p <= 1.0))
    np.testing.assert_allclose(p.sum(axis=axis), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p, torch.softmax(_t(x), dim=axis).numpy(), rtol=RTOL, atol=ATOL)


@PROPS
@given(attention_inputs(), softmax_inputs(bound=10))
def test_property_inputs_are_not_modified_and_outputs_are_new(inputs, x_axis):
    Q, K, V, mask, _ = inputs
    x, axis = x_axis
    before = [a.copy() for a in (Q, K, V, x)] + [None if mask is None else mask.copy()]
    out, weights = scaled_dot_product_attention(Q, K, V, mask)
    p = softmax(x, axis=axis)
    for a, b in zip((Q, K, V, x, mask), before):
        if b is not None:
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
    # Results must be fresh arrays: mutating them may not reach back into the caller's data.
    for result in (out, weights, p):
        for a in (Q, K, V, x):
            assert not np.shares_memory(result, a)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.int64, np.uint8])
def test_outputs_are_float64_and_computed_in_float64(dtype):
    """Low-precision or integer inputs are upcast first, so the result equals the float64 one."""
    rng = _rng(10)

    def draw(shape):
        if np.issubdtype(dtype, np.integer):  # small non-negative ints fit every int dtype
            return rng.integers(0, 4, size=shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    Q, K, V = draw((3, 4)), draw((5, 4)), draw((5, 2))
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert out.dtype == weights.dtype == np.float64
    out64, weights64 = scaled_dot_product_attention(*(a.astype(np.float64) for a in (Q, K, V)))
    np.testing.assert_array_equal(out, out64)
    np.testing.assert_array_equal(weights, weights64)
    p = softmax(Q)
    assert p.dtype == np.float64
    np.testing.assert_array_equal(p, softmax(Q.astype(np.float64)))


def test_plain_python_lists_are_accepted():
    out, weights = scaled_dot_product_attention([[1, 0]], [[1, 0], [0, 1]], [[1], [3]])
    assert out.dtype == weights.dtype == np.float64
    e = np.exp(1 / np.sqrt(2))
    np.testing.assert_allclose(weights, [[e / (e + 1), 1 / (e + 1)]], rtol=1e-15)
    np.testing.assert_allclose(out, [[(e + 3) / (e + 1)]], rtol=1e-15)
    np.testing.assert_allclose(softmax([0, 0, 0, 0]), [0.25] * 4, rtol=0, atol=0)


# --------------------------------------------------------------------------------------------
# 3. Clear errors
# --------------------------------------------------------------------------------------------


def _z(*shape):
    return np.zeros(shape)


def _msg(*parts: str) -> str:
    """Regex requiring the literal parts in this order, anything between."""
    return ".*".join(re.escape(p) for p in parts)


@pytest.mark.parametrize(
    "Q, K, V, mask, pattern",
    [
        pytest.param(_z(2, 4), _z(3, 5), _z(3, 6), None, _msg("Q", "(2, 4)", "K", "(3, 5)"), id="dk-mismatch"),
        pytest.param(_z(2, 4), _z(3, 4), _z(5, 6), None, _msg("K", "(3, 4)", "V", "(5, 6)"), id="Lk-mismatch"),
        pytest.param(_z(4), _z(3, 4), _z(3, 6), None, _msg("Q", "at least 2", "(4,)"), id="Q-1d"),
        pytest.param(np.float64(1.0), _z(3, 4), _z(3, 6), None, _msg("Q", "at least 2", "()"), id="Q-0d"),
        pytest.param(_z(2, 4), _z(4), _z(3, 6), None, _msg("K", "at least 2", "(4,)"), id="K-1d"),
        pytest.param(_z(2, 4), _z(3, 4), _z(3), None, _msg("V", "at least 2", "(3,)"), id="V-1d"),
        pytest.param(
            _z(2, 3, 4), _z(3, 5, 4), _z(3, 5, 6), None,
            _msg("batch", "Q (2, 3, 4)", "K (3, 5, 4)", "V (3, 5, 6)", "do not broadcast"),
            id="batch-no-broadcast",
        ),
        pytest.param(
            _z(2, 3, 4), _z(2, 5, 4), _z(4, 5, 6), None,
            _msg("batch", "Q (2, 3, 4)", "K (2, 5, 4)", "V (4, 5, 6)"),
            id="batch-V-no-broadcast",
        ),
        pytest.param(
            _z(3, 4), _z(5, 4), _z(5, 6), np.ones(4, dtype=bool),
            _msg("mask", "(4,)", "(3, 5)"), id="mask-wrong-Lk",
        ),
        pytest.param(
            _z(2, 3, 4), _z(2, 5, 4), _z(2, 5, 6), np.ones((3, 3, 5), dtype=bool),
            _msg("mask", "(3, 3, 5)", "(2, 3, 5)"), id="mask-wrong-batch",
        ),
        pytest.param(
            _z(3, 4), _z(5, 4), _z(5, 6), np.ones((2, 3, 5), dtype=bool),
            _msg("mask", "(2, 3, 5)", "(3, 5)"), id="mask-would-add-batch-axes",
        ),
        pytest.param(
            _z(3, 4), _z(5, 4), _z(5, 6), np.ones((5, 3), dtype=bool),
            _msg("mask", "(5, 3)", "(3, 5)"), id="mask-transposed",
        ),
    ],
)
def test_bad_shapes_raise_value_error_naming_argument_and_shape(Q, K, V, mask, pattern):
    with pytest.raises(ValueError, match=pattern):
        scaled_dot_product_attention(Q, K, V, mask)


@pytest.mark.parametrize(
    "mask, dtype_name",
    [
        (np.ones((3, 5), dtype=np.int64), "int64"),
        (np.ones((3, 5), dtype=np.float64), "float64"),
        (np.ones((3, 5), dtype=np.uint8), "uint8"),
        ([[1, 0, 1, 0, 1]] * 3, "int"),
    ],
)
def test_non_bool_mask_raises_type_error(mask, dtype_name):
    """Integer masks are refused on purpose: 1 = attend or 1 = blocked is ambiguous."""
    with pytest.raises(TypeError, match=_msg("mask", "bool", dtype_name)):
        scaled_dot_product_attention(_z(3, 4), _z(5, 4), _z(5, 6), mask)


@pytest.mark.parametrize("bad_arg", ["Q", "K", "V"])
@pytest.mark.parametrize(
    "bad_value, expected",
    [
        (np.array([["a", "b", "c", "d"]] * 5), "real numbers"),
        (np.ones((5, 4), dtype=complex), "real numbers"),
        (np.ones((5, 4), dtype=bool), "real numbers"),
        (np.empty((5, 4), dtype=object), "real numbers"),
        ([[1.0, 2.0], [3.0]], "array-like"),
    ],
    ids=["str", "complex", "bool", "object", "ragged"],
)
def test_non_numeric_inputs_raise_type_error_naming_argument(bad_arg, bad_value, expected):
    args = {"Q": _z(5, 4), "K": _z(5, 4), "V": _z(5, 4)}
    args[bad_arg] = bad_value
    with pytest.raises(TypeError, match=rf"^{bad_arg} .*{expected}"):
        scaled_dot_product_attention(args["Q"], args["K"], args["V"])


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.ones(3, dtype=complex), [[1.0], [1.0, 2.0]]])
def test_softmax_non_numeric_raises_type_error(bad):
    with pytest.raises(TypeError, match=r"^x "):
        softmax(bad)


@pytest.mark.parametrize("axis", [2, -3, 10])
def test_softmax_axis_out_of_range_raises_value_error(axis):
    with pytest.raises(ValueError, match=_msg(f"axis={axis}", "out of range", "(2, 3)")):
        softmax(_z(2, 3), axis=axis)


@pytest.mark.parametrize("axis", [1.0, "0", None, True])
def test_softmax_non_int_axis_raises_type_error(axis):
    with pytest.raises(TypeError, match="axis must be an int"):
        softmax(_z(2, 3), axis=axis)


@pytest.mark.parametrize("x", [np.float64(3.0), np.array(2.0), 5])
def test_softmax_of_0d_raises_value_error(x):
    with pytest.raises(ValueError, match=_msg("x", "at least 1", "()")):
        softmax(x)


# --------------------------------------------------------------------------------------------
# 4. Edge cases: empty key sets and NaN inputs
# --------------------------------------------------------------------------------------------


def test_no_keys_at_all_gives_zero_output_like_torch():
    """Lk = 0 is the limit of 'no allowed key': zero weights and zero output, no NumPy error."""
    Q, K, V = _z(2, 3) + 1, _z(0, 3), _z(0, 4)
    out, weights = reference_no_warnings(Q, K, V)
    assert out.shape == (2, 4) and np.array_equal(out, np.zeros((2, 4)))
    assert weights.shape == (2, 0)
    t_out = F.scaled_dot_product_attention(_t(Q), _t(K), _t(V)).numpy()
    np.testing.assert_array_equal(out, t_out)


@pytest.mark.parametrize("shape, axis", [((0,), 0), ((2, 0), -1), ((3, 0, 2), 1)])
def test_softmax_over_an_empty_axis_returns_an_empty_float64_array(shape, axis):
    x = np.zeros(shape, dtype=np.float32)
    p = softmax(x, axis=axis)
    assert p.shape == shape and p.dtype == np.float64
    assert not np.shares_memory(p, x)


def test_nan_inputs_propagate_instead_of_becoming_zeros():
    """A NaN must stay visible (as in torch), not pass for a fully-masked row of zeros."""
    x = np.array([[np.nan, 0.0, 1.0], [0.0, 1.0, 2.0]])
    p = softmax(x)
    np.testing.assert_array_equal(np.isnan(p), np.isnan(torch.softmax(_t(x), dim=-1).numpy()))
    assert np.isnan(p[0]).any()
    np.testing.assert_allclose(p[1], torch.softmax(_t(x[1]), dim=0).numpy(), rtol=RTOL)

    Q = np.array([[np.nan, 0.0], [1.0, 0.0]])
    out, weights = scaled_dot_product_attention(Q, np.eye(2), np.eye(2))
    assert np.isnan(weights[0]).any() and np.isnan(out[0]).any()
    assert np.isfinite(weights[1]).all() and np.isfinite(out[1]).all()


def test_nan_in_a_masked_key_position_does_not_leak_into_the_weights():
    """Masking replaces the logit itself, so a NaN logit of a blocked key is harmless."""
    K = np.array([[1.0, 0.0], [np.nan, 0.0]])
    out, weights = reference_no_warnings(np.eye(2), K, np.eye(2), np.array([True, False]))
    np.testing.assert_array_equal(weights, [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(out, [[1.0, 0.0], [1.0, 0.0]])


def test_empty_query_key_width_is_refused():
    # d_k = 0 would divide 0 by 0; say so instead of returning NaN.
    with pytest.raises(ValueError, match=r"d_k.*Q \(2, 0\).*K \(3, 0\)"):
        scaled_dot_product_attention(np.zeros((2, 0)), np.zeros((3, 0)), np.zeros((3, 4)))


def test_weights_carry_every_batch_axis_even_one_only_V_has():
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(2, 5, 6))
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (2, 3, 6) and weights.shape == (2, 3, 5)
    np.testing.assert_allclose(out, weights @ V)
    np.testing.assert_allclose(weights[0], weights[1])


# ---------------------------------------------------------------------------------------------
# 01.self_attention (stretch): against nn.MultiheadAttention with one head, and its properties


def test_self_attention_matches_torch_multihead_attention_with_one_head():
    """One head, no biases, W_o the identity: nn.MultiheadAttention is exactly self-attention.
    torch stores in_proj_weight as (3 d, d) used as x @ W.T, so W_q is its first block, transposed."""
    d = 6
    rng = np.random.default_rng(11)
    X = rng.normal(size=(2, 5, d))
    mha = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.out_proj.weight.copy_(torch.eye(d, dtype=torch.float64))
    W = mha.in_proj_weight.detach().numpy()
    W_q, W_k, W_v = (W[i * d:(i + 1) * d].T for i in range(3))
    causal = np.tril(np.ones((5, 5), dtype=bool))
    for mask in (None, causal):
        t = torch.from_numpy(X)
        attn_mask = None if mask is None else torch.from_numpy(~mask)  # torch: True = blocked
        want_out, want_w = mha(t, t, t, attn_mask=attn_mask, need_weights=True)
        out, weights = self_attention(X, W_q, W_k, W_v, mask)
        np.testing.assert_allclose(out, want_out.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights, want_w.detach().numpy(), rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5),
       st.floats(0.1, 10.0), st.integers(0, 2**31 - 1))
def test_self_attention_properties(L, d, d_k, d_v, c, seed):
    """Equivariant under a permutation of the tokens; only W_q W_k^T matters; the scale is d_k's."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(L, d))
    W_q, W_k = rng.normal(size=(d, d_k)), rng.normal(size=(d, d_k))
    W_v = rng.normal(size=(d, d_v))
    out, weights = self_attention(X, W_q, W_k, W_v)
    perm = rng.permutation(L)
    out_p, weights_p = self_attention(X[perm], W_q, W_k, W_v)
    np.testing.assert_allclose(out_p, out[perm], atol=1e-10)
    np.testing.assert_allclose(weights_p, weights[perm][:, perm], atol=1e-10)
    np.testing.assert_allclose(self_attention(X, c * W_q, W_k / c, W_v)[1], weights, atol=1e-10)
    scores = X @ W_q @ W_k.T @ X.T / np.sqrt(d_k)
    np.testing.assert_allclose(weights, softmax(scores), atol=1e-12)


@pytest.mark.parametrize("args, exc, pattern", [
    ((np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 2)), np.ones((4, 3))), ValueError, r"W_q .*\(5, 2\).*X \(3, 4\)"),
    ((np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 3))), ValueError, r"W_q \(4, 2\) and W_k \(4, 3\)"),
    ((np.ones(4), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 3))), ValueError, r"X must have at least 2"),
    ((np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 2)), np.ones((4,))), ValueError, r"W_v"),
])
def test_self_attention_bad_arguments_are_named(args, exc, pattern):
    with pytest.raises(exc, match=pattern):
        self_attention(*args)


def test_self_attention_does_not_modify_its_inputs():
    rng = np.random.default_rng(2)
    args = [rng.normal(size=s) for s in ((2, 3, 4), (4, 2), (4, 2), (4, 5))]
    copies = [a.copy() for a in args]
    self_attention(*args, np.tril(np.ones((3, 3), dtype=bool)))
    for a, b in zip(args, copies):
        np.testing.assert_array_equal(a, b)
