"""Chapter 01 bugs as learners make them (written without looking at the registry's variants)."""

from __future__ import annotations

import math

import numpy as np

SOFTMAX = "01.softmax"
SDPA = "01.scaled_dot_product_attention"


def softmax_divide_by_max(x, axis=-1):
    """Normalises by the largest exponential instead of the sum."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.max(axis=axis, keepdims=True)


def softmax_forgot_division(x, axis=-1):
    """Stable exponentials, never divided by their total."""
    return np.exp(x - np.max(x, axis=axis, keepdims=True))


def softmax_returns_log(x, axis=-1):
    """Computes log-softmax (the cross-entropy habit) and returns it."""
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def softmax_with_temperature_two(x, axis=-1):
    """Leaves in a temperature from an experiment: softmax(x / 2)."""
    z = x / 2.0
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_whole_array_total(x, axis=-1):
    """Divides by the sum of every exponential in the array, not the slice's."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum()


def softmax_negated(x, axis=-1):
    """softmin: exp(-x), a sign slip."""
    z = -x
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_transpose_not_undone(x, axis=-1):
    """Moves `axis` last to work on rows, and forgets to move it back."""
    moved = np.moveaxis(x, axis, -1)
    e = np.exp(moved - moved.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_rounded(x, axis=-1):
    """Rounds to 4 decimals 'to make the output readable'."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.round(e / e.sum(axis=axis, keepdims=True), 4)


def softmax_float32_inside(x, axis=-1):
    """Does the work in float32 for speed and casts back to float64."""
    y = np.asarray(x, dtype=np.float32)
    e = np.exp(y - y.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float64)


def softmax_squared_weights(x, axis=-1):
    """Squares the normalised exponentials (confuses softmax with a 'sharpened' version)."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    return p * p / (p * p).sum(axis=axis, keepdims=True)


def softmax_loop_last_axis_only(x, axis=-1):
    """Loops over rows of a 2-D view of x, which is always the last axis."""
    flat = np.asarray(x, dtype=float).reshape(-1, np.shape(x)[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        e = [math.exp(v - max(row)) for v in row]
        out[r] = [v / sum(e) for v in e]
    return out.reshape(np.shape(x))


# --- scaled dot-product attention --------------------------------------------------------

def _rows_softmax(s):
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)


def _kt(K):
    return np.swapaxes(K, -1, -2)


def sdpa_multiplies_by_sqrt(Q, K, V, mask=None):
    """Multiplies the scores by sqrt(d_k) instead of dividing."""
    s = (Q @ _kt(K)) * math.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_never_masks(Q, K, V, mask=None):
    """Accepts `mask` and never uses it."""
    w = _rows_softmax(Q @ _kt(K) / np.sqrt(K.shape[-1]))
    return w @ V, w


def sdpa_keys_as_values(Q, K, V, mask=None):
    """Averages the keys instead of the values."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w @ K, w


def sdpa_weights_returned_transposed(Q, K, V, mask=None):
    """Returns the weights as (keys, queries), 'like the picture in the paper'."""
    s = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w @ V, np.swapaxes(w, -1, -2)


def sdpa_queries_and_keys_swapped(Q, K, V, mask=None):
    """Scores K Q^T (keys attend to queries)."""
    s = K @ np.swapaxes(Q, -1, -2) / np.sqrt(Q.shape[-1])
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_fill_minus_1e4(Q, K, V, mask=None):
    """Blocks with -1e4 and nothing else: a fully blocked query spreads evenly."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -1e4)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def sdpa_loops_nan_rows(Q, K, V, mask=None):
    """Python loops over the last two axes; -inf fill, no care for empty rows."""
    s = Q @ _kt(K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def sdpa_softmax_over_both_axes(Q, K, V, mask=None):
    """Normalises each score matrix as a whole (over queries and keys together)."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=(-2, -1), keepdims=True)
    e = np.exp(s - m)
    w = e / e.sum(axis=(-2, -1), keepdims=True)
    return w @ V, w


def sdpa_returns_weights_first(Q, K, V, mask=None):
    """Returns (weights, out), the opposite order."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w, w @ V


def sdpa_mask_multiplies_scores(Q, K, V, mask=None):
    """Multiplies the scores by the mask (0 where blocked)."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = s * mask
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_scale_by_num_keys(Q, K, V, mask=None):
    """Divides by sqrt of the number of keys."""
    s = Q @ _kt(K) / np.sqrt(K.shape[-2])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_mask_added_as_numbers(Q, K, V, mask=None):
    """Adds the boolean mask to the scores (True -> +1) as if it were an additive mask."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = s + mask
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_unnormalised(Q, K, V, mask=None):
    """exp of the masked scores, never divided by the row sums."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s)
    return w @ V, w


def sdpa_log_weights(Q, K, V, mask=None):
    """Keeps the weights in log space (log-softmax) and exponentiates only for the output."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    with np.errstate(divide="ignore"):
        return w @ V, np.log(w)


def sdpa_K_dot_T(Q, K, V, mask=None):
    """`K.T` on a batched K reverses every axis, not the last two."""
    s = Q @ K.T / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    return w @ V, w


def sdpa_weights_of_first_batch(Q, K, V, mask=None):
    """Computes the weights for the first batch element and reuses them for every element."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _rows_softmax(s)
    if w.ndim > 2:
        w = np.broadcast_to(w[:1], w.shape).copy()
    return w @ V, w


def sdpa_softmax_over_queries_unfixed(Q, K, V, mask=None):
    """softmax along axis=-2 (over the queries), the NaN of a key nobody may see left as is."""
    s = Q @ _kt(K) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ V, w


BUGS = [
    (SOFTMAX, f) for f in (
        softmax_divide_by_max, softmax_forgot_division, softmax_returns_log, softmax_with_temperature_two,
        softmax_whole_array_total, softmax_negated, softmax_transpose_not_undone, softmax_rounded,
        softmax_float32_inside, softmax_squared_weights, softmax_loop_last_axis_only)
] + [
    (SDPA, f) for f in (
        sdpa_multiplies_by_sqrt, sdpa_never_masks, sdpa_keys_as_values, sdpa_weights_returned_transposed,
        sdpa_queries_and_keys_swapped, sdpa_fill_minus_1e4, sdpa_loops_nan_rows, sdpa_softmax_over_both_axes,
        sdpa_returns_weights_first, sdpa_mask_multiplies_scores, sdpa_scale_by_num_keys,
        sdpa_mask_added_as_numbers, sdpa_unnormalised, sdpa_log_weights, sdpa_K_dot_T,
        sdpa_weights_of_first_batch, sdpa_softmax_over_queries_unfixed)
]
