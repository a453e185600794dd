"""Chapter 04 bugs as learners make them."""

from __future__ import annotations

import math

import numpy as np

SPLIT = "04.split_heads"
MERGE = "04.merge_heads"
MHA = "04.multi_head_attention"


def split_plain_reshape(X, num_heads):
    """np.reshape to the target shape, no transpose."""
    B, L, d = X.shape
    return np.reshape(X, (B, num_heads, L, d // num_heads))


def split_forgets_transpose(X, num_heads):
    """Stops at (B, L, h, d_h)."""
    B, L, d = X.shape
    return X.reshape(B, L, num_heads, d // num_heads)


def split_transposes_too_much(X, num_heads):
    """transpose(0, 2, 3, 1): (B, h, d_h, L)."""
    B, L, d = X.shape
    return X.reshape(B, L, num_heads, d // num_heads).transpose(0, 2, 3, 1)


def split_heads_reversed(X, num_heads):
    """Slices the heads from the right end of the features."""
    B, L, d = X.shape
    d_h = d // num_heads
    return np.stack([X[..., d - (i + 1) * d_h: d - i * d_h] for i in range(num_heads)], axis=1)


def split_strided_columns(X, num_heads):
    """Head i takes columns i, i + h, ... (X[..., i::h])."""
    return np.stack([X[..., i::num_heads] for i in range(num_heads)], axis=1)


def merge_plain_reshape(X):
    """Reshape (B, h, L, d_h) straight to (B, L, h * d_h)."""
    B, h, L, d_h = X.shape
    return X.reshape(B, L, h * d_h)


def merge_not_flattened(X):
    """Transposes to (B, L, h, d_h) and stops there."""
    return X.transpose(0, 2, 1, 3)


def merge_sums_heads(X):
    """Adds the heads together instead of concatenating."""
    return X.sum(axis=1)


def merge_concatenates_positions(X):
    """np.concatenate along the wrong axis, then a reshape to make the shape fit."""
    B, h, L, d_h = X.shape
    return np.concatenate(list(X.transpose(1, 0, 2, 3)), axis=1).reshape(B, L, h * d_h)


def _split(X, h):
    B, L, d = X.shape
    return X.reshape(B, L, h, d // h).transpose(0, 2, 1, 3)


def _merge(Y):
    B, h, L, d_h = Y.shape
    return Y.transpose(0, 2, 1, 3).reshape(B, L, h * d_h)


def _softmax(s):
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)


def _mha(X, W_q, W_k, W_v, W_o, h, mask, scale=None, use_mask=True, softmax_axis=-1,
         keys_from=None, invert=False, values_from=None):
    d = X.shape[-1]
    q = _split(X @ W_q, h)
    k = _split(X @ (keys_from if keys_from is not None else W_k), h)
    v = _split(X @ W_v, h) if values_from is None else _split(values_from(X), h)
    s = q @ np.swapaxes(k, -1, -2) / (math.sqrt(d // h) if scale is None else scale)
    if mask is not None and use_mask:
        s = np.where(~mask if invert else mask, s, -np.inf)
    if softmax_axis == -1:
        w = _softmax(s)
    else:
        w = np.moveaxis(_softmax(np.moveaxis(s, softmax_axis, -1)), -1, softmax_axis)
    return _merge(w @ v) @ W_o, w


def mha_unscaled(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Forgets 1/sqrt(d_h)."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, scale=1.0)


def mha_mask_unused(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Has a mask parameter and never reads it."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, use_mask=False)


def mha_head_averaged_weights(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Returns the weights averaged over heads, like nn.MultiheadAttention's default."""
    out, w = _mha(X, W_q, W_k, W_v, W_o, num_heads, mask)
    return out, w.mean(axis=1)


def mha_values_not_projected(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Uses X itself as the values (forgets W_v)."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, values_from=lambda x: x)


def mha_keys_with_query_weights(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Copy-paste slip: K = X @ W_q."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, keys_from=W_q)


def mha_mask_negated(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Reads the mask as True = blocked."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, invert=True)


def mha_softmax_over_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """softmax(axis=1): normalises across heads."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, softmax_axis=1)


def mha_no_output_projection(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Returns the merged heads."""
    out, w = _mha(X, W_q, W_k, W_v, np.eye(X.shape[-1]), num_heads, mask)
    return out, w


def mha_scale_by_num_heads(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Divides by sqrt(num_heads)."""
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, scale=math.sqrt(num_heads))


def mha_output_projection_transposed(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Uses W_o.T at the end only."""
    out, w = _mha(X, W_q, W_k, W_v, np.eye(X.shape[-1]), num_heads, mask)
    return out @ W_o.T, w


def mha_softmax_over_queries(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    return _mha(X, W_q, W_k, W_v, W_o, num_heads, mask, softmax_axis=-2)


def mha_keys_dot_T(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """`k.T` on the (B, h, L, d_h) keys: every axis reversed, a shape error in the product."""
    q, k, v = (_split(X @ W, num_heads) for W in (W_q, W_k, W_v))
    s = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _softmax(s)
    return _merge(w @ v) @ W_o, w


def mha_merge_heads_last(X, W_q, W_k, W_v, W_o, num_heads, mask=None):
    """Right split and attention; the merge puts the head axis last, interleaving the heads."""
    q, k, v = (_split(X @ W, num_heads) for W in (W_q, W_k, W_v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _softmax(s)
    heads = w @ v
    B, h, L, d_h = heads.shape
    return np.einsum("bhld->bldh", heads).reshape(B, L, h * d_h) @ W_o, w


BUGS = (
    [(SPLIT, f) for f in (split_plain_reshape, split_forgets_transpose, split_transposes_too_much,
                          split_heads_reversed, split_strided_columns)]
    + [(MERGE, f) for f in (merge_plain_reshape, merge_not_flattened, merge_sums_heads,
                            merge_concatenates_positions)]
    + [(MHA, f) for f in (mha_unscaled, mha_mask_unused, mha_head_averaged_weights, mha_values_not_projected,
                          mha_keys_with_query_weights, mha_mask_negated, mha_softmax_over_heads,
                          mha_no_output_projection, mha_scale_by_num_heads, mha_output_projection_transposed,
                          mha_keys_dot_T, mha_merge_heads_last, mha_softmax_over_queries)]
)
