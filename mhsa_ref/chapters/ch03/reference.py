"""Reference masks for chapter 03: causal, padding, and the two combined.

Conventions (see DESIGN.md): a boolean mask with True = "may attend", the convention of
``torch.nn.functional.scaled_dot_product_attention``. Masks are built for self-attention over
sequences of length ``L`` padded at the end; ``lengths[b]`` is the number of real tokens of
sequence ``b``. Inputs are never modified.
"""

from __future__ import annotations

import numpy as np

__all__ = ["causal_mask", "padding_mask", "build_attention_mask", "packed_mask"]


def _check_L(L: object) -> int:
    """``L`` as a Python int, or an error naming it."""
    if isinstance(L, (bool, np.bool_)) or not isinstance(L, (int, np.integer)):
        raise TypeError(f"L must be a positive int (the sequence length), got {type(L).__name__} {L!r}")
    if L < 1:
        raise ValueError(f"L must be a positive int (the sequence length), got L={int(L)}")
    return int(L)


def _check_lengths(lengths: object, L: int) -> np.ndarray:
    """``lengths`` as a new 1-D int64 array with 0 <= lengths <= L, or an error naming it."""
    try:
        arr = np.asarray(lengths)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"lengths must be a 1-D array of integers, got {type(lengths).__name__}: {exc}") from None
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"lengths must hold integers, got dtype {arr.dtype} with shape {arr.shape}")
    if arr.ndim != 1:
        raise ValueError(f"lengths must be 1-D (one length per sequence), got shape {arr.shape}")
    bad = (arr < 0) | (arr > L)
    if bad.any():
        raise ValueError(
            f"lengths must lie between 0 and L={L}, got {arr[bad].tolist()} in lengths {arr.tolist()}"
        )
    return np.array(arr, dtype=np.int64, copy=True)


def causal_mask(L: int) -> np.ndarray:
    """Boolean ``(L, L)`` mask, True where key j <= query i: each position sees itself and the past.

    This is the lower triangle including the diagonal, as in GPT-style decoders
    (Vaswani et al., 2017, section 3.2.3).
    """
    L = _check_L(L)
    positions = np.arange(L)
    return positions[None, :] <= positions[:, None]  # [i, j] = (j <= i)


def padding_mask(lengths: np.ndarray, L: int) -> np.ndarray:
    """Boolean ``(B, L)`` mask, True at the real tokens: ``[b, t] = (t < lengths[b])``."""
    L = _check_L(L)
    lengths = _check_lengths(lengths, L)
    return np.arange(L)[None, :] < lengths[:, None]


def build_attention_mask(lengths: np.ndarray, L: int, causal: bool = False) -> np.ndarray:
    """Boolean ``(B, 1, L, L)`` self-attention mask for padded sequences, optionally causal.

    ``[b, 0, i, j]`` is True when key ``j`` is a real token of sequence ``b`` (and, if
    ``causal``, ``j <= i``). Only keys are blocked: a padded query row may still attend to the
    real keys (its output is ignored downstream). The axis of length 1 broadcasts over heads,
    so the mask applies to scores of shape ``(B, h, L, L)``. A sequence of length 0 has every
    row fully masked; chapter 01's attention gives such rows zero weights and a zero output.
    """
    L = _check_L(L)
    lengths = _check_lengths(lengths, L)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} {causal!r}")
    keys = padding_mask(lengths, L)[:, None, None, :]  # (B, 1, 1, L): one row per sequence
    mask = np.broadcast_to(keys, (len(lengths), 1, L, L))
    if causal:
        mask = mask & causal_mask(L)  # (L, L) broadcasts over batch and head
    return np.array(mask, dtype=bool, copy=True)


def packed_mask(segment_ids: np.ndarray, causal: bool = True) -> np.ndarray:
    """Boolean ``(B, 1, L, L)`` mask for several documents packed into each row.

    ``segment_ids[b, t]`` names the document of token ``t`` in row ``b`` (documents are
    contiguous runs). ``[b, 0, i, j]`` is True when tokens ``i`` and ``j`` belong to the same
    document (and, if ``causal``, ``j <= i``): no token reads across a document boundary, as in
    LLM pre-training on packed sequences. It is block-diagonal, the mask chunked attention
    (chapter 07) uses when every document has the chunk's length.
    """
    try:
        ids = np.asarray(segment_ids)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"segment_ids must be a 2-D array of integers, got {type(segment_ids).__name__}: {exc}") from None
    if ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"segment_ids must hold integers, got dtype {ids.dtype} with shape {ids.shape}")
    if ids.ndim != 2 or ids.shape[1] < 1:
        raise ValueError(f"segment_ids must have shape (B, L) with L >= 1, got shape {ids.shape}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} {causal!r}")
    same = ids[:, :, None] == ids[:, None, :]  # (B, L, L): [b, i, j] = same document
    if causal:
        same = same & causal_mask(ids.shape[1])
    return same[:, None]  # head axis, as build_attention_mask
