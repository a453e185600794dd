"""Chapter 03 bugs as learners make them."""

from __future__ import annotations

import numpy as np

CAUSAL = "03.causal_mask"
PADDING = "03.padding_mask"
BUILD = "03.build_attention_mask"


def causal_blocked_is_true(L):
    """True where the key is in the future (a 'blocked' mask)."""
    i, j = np.indices((L, L))
    return j > i


def causal_columns_rows_swapped(L):
    """Compares the other way: True where query <= key."""
    pos = np.arange(L)
    return pos[:, None] <= pos[None, :]


def causal_one_future_key(L):
    """np.tril with k=1: each position also sees the next one."""
    return np.tril(np.ones((L, L), dtype=bool), k=1)


def causal_with_batch_axis(L):
    """Returns a (1, L, L) mask 'ready to broadcast'."""
    return np.tril(np.ones((L, L), dtype=bool))[None]


def causal_float_ones(L):
    """np.tri gives floats."""
    return np.tri(L)


def padding_true_on_pads(lengths, L):
    """True on the padded positions."""
    return np.arange(L)[None, :] >= np.asarray(lengths)[:, None]


def padding_broadcast_ready(lengths, L):
    """Returns (B, 1, 1, L), already shaped for the scores."""
    return (np.arange(L)[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]


def padding_loops_one_extra(lengths, L):
    """Loops, `range(n + 1)`."""
    m = np.zeros((len(lengths), L), dtype=bool)
    for b, n in enumerate(lengths):
        m[b, : int(n) + 1] = True
    return m


def padding_position_major(lengths, L):
    """Builds (L, B): one row per position."""
    return np.stack([np.arange(len(lengths)) * 0 + t < np.asarray(lengths) for t in range(L)])


def padding_uint8(lengths, L):
    """Returns uint8 0/1, the old PyTorch habit."""
    return (np.arange(L)[None, :] < np.asarray(lengths)[:, None]).astype(np.uint8)


def _pad(lengths, L):
    return np.arange(L)[None, :] < np.asarray(lengths)[:, None]


def build_ignores_causal(lengths, L, causal=False):
    """Never adds the causal part."""
    keys = _pad(lengths, L)
    return np.broadcast_to(keys[:, None, None, :], (len(keys), 1, L, L)).copy()


def build_or_instead_of_and(lengths, L, causal=False):
    """Combines padding and causal parts with `|`."""
    keys = np.broadcast_to(_pad(lengths, L)[:, None, None, :], (len(lengths), 1, L, L))
    if causal:
        return keys | np.tril(np.ones((L, L), dtype=bool))
    return keys.copy()


def build_head_axis_in_the_middle(lengths, L, causal=False):
    """Inserts the head axis at position 2: (B, L, 1, L)."""
    m = np.repeat(_pad(lengths, L)[:, None, :], L, axis=1)
    if causal:
        m = m & np.tril(np.ones((L, L), dtype=bool))
    return m[:, :, None, :]


def build_blocked_is_true(lengths, L, causal=False):
    """Returns True where attention is blocked."""
    keys = _pad(lengths, L)[:, None, None, :]
    allowed = keys & np.tril(np.ones((L, L), dtype=bool)) if causal else np.broadcast_to(keys, (len(lengths), 1, L, L))
    return ~allowed


def build_rows_padded(lengths, L, causal=False):
    """Blocks padded queries (rows) only."""
    rows = _pad(lengths, L)[:, None, :, None]
    m = np.broadcast_to(rows, (len(lengths), 1, L, L))
    return m & np.tril(np.ones((L, L), dtype=bool)) if causal else m.copy()


def build_no_head_axis(lengths, L, causal=False):
    """Returns (B, L, L)."""
    m = np.repeat(_pad(lengths, L)[:, None, :], L, axis=1)
    return m & np.tril(np.ones((L, L), dtype=bool)) if causal else m


def build_causal_future(lengths, L, causal=False):
    """Uses np.triu for the causal part."""
    m = np.repeat(_pad(lengths, L)[:, None, :], L, axis=1)
    if causal:
        m = m & np.triu(np.ones((L, L), dtype=bool))
    return m[:, None]


def build_ints(lengths, L, causal=False):
    """Multiplies 0/1 integer masks together."""
    m = np.repeat(_pad(lengths, L)[:, None, :], L, axis=1).astype(int)
    if causal:
        m = m * np.tri(L, dtype=int)
    return m[:, None]


BUGS = (
    [(CAUSAL, f) for f in (causal_blocked_is_true, causal_columns_rows_swapped, causal_one_future_key,
                           causal_with_batch_axis, causal_float_ones)]
    + [(PADDING, f) for f in (padding_true_on_pads, padding_broadcast_ready, padding_loops_one_extra,
                              padding_position_major, padding_uint8)]
    + [(BUILD, f) for f in (build_ignores_causal, build_or_instead_of_and, build_head_axis_in_the_middle,
                            build_blocked_is_true, build_rows_padded, build_no_head_axis,
                            build_causal_future, build_ints)]
)
