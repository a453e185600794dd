"""Reference for chapter 08, NumPy part: the softmax's backward pass.

For p = softmax(s) along the last axis, chapter 02's Jacobian is J = diag(p) - p pᵀ, and it is
symmetric, so the gradient of a loss with respect to the scores is

    ∂ℓ/∂s = J ∂ℓ/∂p = p ⊙ (g - (g · p))        with g = ∂ℓ/∂p, (g · p) one number per row.

Written this way it costs O(n) per row and never builds the (n, n) Jacobian; it is the line at
the heart of every attention backward pass, recomputed or not.
"""

from __future__ import annotations

import numpy as np


def softmax_backward(p: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The gradient with respect to the scores s, given p = softmax(s, axis=-1) and grad = ∂ℓ/∂p."""
    p, grad = np.asarray(p), np.asarray(grad)
    if p.shape != grad.shape:
        raise ValueError(f"p has shape {p.shape} but grad has shape {grad.shape}; they must match")
    if p.ndim == 0:
        raise ValueError("p must have at least one axis (the softmax's), got a scalar")
    return p * (grad - np.sum(grad * p, axis=-1, keepdims=True))
