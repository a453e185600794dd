"""Reference for chapter 10, PyTorch part: attention rollout (Abnar & Zuidema 2020).

One layer's attention map says which tokens a position read from that layer's input; but that
input is already a mixture of tokens made by the layers below, and the residual connection
carries each position's own vector past every attention. Rollout follows the mixing down
through the layers:

    Â_l = 0.5 * mean_h A_l + 0.5 * I      (the residual as attention to oneself),
          rows renormalised to sum 1,
    R   = Â_L @ ... @ Â_2 @ Â_1           (the last layer on the left).

Row i of R spreads position i's final vector over the input tokens. It is an approximation
(it ignores the values, the MLPs and the weights of the mixing), a picture to look at, not an
explanation.
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["attention_rollout"]


def attention_rollout(weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """Rollout of per-layer attention maps ``weights`` (one (B, h, L, L) tensor per layer, first
    layer first, e.g. ``TinyTransformer.attention_maps()``): returns (B, L, L); rows sum to 1."""
    if isinstance(weights, torch.Tensor) or not isinstance(weights, Sequence) or len(weights) == 0:
        raise TypeError("weights must be a non-empty list of (B, h, L, L) tensors, one per layer, "
                        f"got {type(weights).__name__}")
    first = weights[0]
    for i, a in enumerate(weights):
        if not isinstance(a, torch.Tensor) or not a.is_floating_point():
            raise TypeError(f"weights[{i}] must be a floating-point torch.Tensor, got {type(a).__name__}")
        if a.dim() != 4 or a.shape[-1] != a.shape[-2] or a.shape != first.shape:
            raise ValueError(f"weights[{i}] must have shape (B, h, L, L) like weights[0] {tuple(first.shape)}, "
                             f"got {tuple(a.shape)}")
        if a.dtype != first.dtype or a.device != first.device:
            raise TypeError(f"weights[{i}] is {a.dtype} on {a.device}, weights[0] {first.dtype} on {first.device}: "
                            "give every layer's map the same dtype and device")
    B, _, L, _ = first.shape
    eye = torch.eye(L, dtype=first.dtype, device=first.device)
    rollout = eye.expand(B, L, L)
    for a in weights:  # first layer first: each new layer multiplies from the left
        a_hat = 0.5 * a.mean(dim=1) + 0.5 * eye
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
        rollout = a_hat @ rollout
    return rollout
