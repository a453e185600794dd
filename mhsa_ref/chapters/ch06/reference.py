"""Reference for chapter 06: layer normalization in NumPy (Ba et al., 2016).

Each vector is normalized on its own, over its d features (the last axis), to mean 0 and
variance 1, then scaled and shifted by the learned ``gamma`` and ``beta``. Unlike batch
normalization it needs no statistics of other examples, so it behaves the same in training and
inference and for a batch of one.
"""

from __future__ import annotations

import numpy as np

from ...validate import as_float_array

__all__ = ["layer_norm"]


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Normalize each vector along the last axis to mean 0, variance 1, then scale and shift.

    ``(x - mean) / sqrt(var + eps) * gamma + beta`` with the biased variance (divide by d, as
    ``nn.LayerNorm`` does): the statistics of this one vector, not an estimate of a population's.
    """
    x = as_float_array(x, "x", min_ndim=1)
    d = x.shape[-1]
    gamma = as_float_array(gamma, "gamma")
    beta = as_float_array(beta, "beta")
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p.shape != (d,):
            raise ValueError(f"{name} must have shape (d,) = ({d},) to match x of shape {x.shape}, "
                             f"got {p.shape}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) or not eps >= 0:
        raise ValueError(f"eps must be a number >= 0, got eps={eps!r}")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta
