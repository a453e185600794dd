"""Reference for chapter 02: the Jacobian of softmax, in NumPy (float64)."""

from __future__ import annotations

import numpy as np

from ...validate import as_float_array

__all__ = ["softmax_jacobian"]


def softmax_jacobian(p: np.ndarray) -> np.ndarray:
    """The (n, n) Jacobian of softmax at the output ``p`` (1-D): J = diag(p) - p p^T.

    With p = softmax(x), dp_i/dx_j = p_i (delta_ij - p_j): raising x_j raises p_j through the
    numerator and lowers every p_i through the shared denominator (chapter 02).
    """
    p = as_float_array(p, "p")
    if p.ndim != 1:
        raise ValueError(
            f"p must be 1-D (one softmax output of shape (n,)), got shape {p.shape}; "
            "for a batch, take the Jacobian of each row separately"
        )
    return np.diag(p) - np.outer(p, p)
