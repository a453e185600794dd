"""Chapter 10's known mistakes in ``attention_rollout``, written the way learners write them.

Kept apart from ``exercises.py`` so that loading the exercise registry does not import PyTorch.
Each takes ``weights``, a list of (B, h, L, L) attention maps (first layer first), and returns
(B, L, L).
"""

from __future__ import annotations

import torch


def _eye(a: torch.Tensor) -> torch.Tensor:
    return torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)


def _renormalised(m: torch.Tensor) -> torch.Tensor:
    return m / m.sum(dim=-1, keepdim=True)


def _product(mats: list[torch.Tensor], last_on_left: bool = True) -> torch.Tensor:
    out = mats[0]
    for m in mats[1:]:
        out = m @ out if last_on_left else out @ m
    return out


def no_residual(weights):
    """The heads' mean map of each layer, multiplied: the residual path left out."""
    return _product([a.mean(dim=1) for a in weights])


def not_renormalised(weights):
    """0.5 * mean + 0.5 * I, rows never divided by their sum (a row of zeros then sums to 0.5)."""
    return _product([0.5 * a.mean(dim=1) + 0.5 * _eye(a) for a in weights])


def identity_added_not_renormalised(weights):
    """A + I: the residual added at full weight, and the rows (which now sum to 2) left as they are."""
    return _product([a.mean(dim=1) + _eye(a) for a in weights])


def renormalised_once_at_the_end(weights):
    """The rows of the product divided by their sums, the layers' own rows left as they are: a row
    of zeros in a lower layer still loses its mass on the way up."""
    return _renormalised(_product([0.5 * a.mean(dim=1) + 0.5 * _eye(a) for a in weights]))


def first_layer_on_the_left(weights):
    """Â_1 @ Â_2 @ ... @ Â_L: the layers multiplied in reading order."""
    return _product([_renormalised(0.5 * a.mean(dim=1) + 0.5 * _eye(a)) for a in weights], last_on_left=False)


def max_over_heads(weights):
    """The largest weight of any head instead of the heads' mean (then renormalised)."""
    return _product([_renormalised(0.5 * a.amax(dim=1) + 0.5 * _eye(a)) for a in weights])


def heads_summed(weights):
    """The heads' sum instead of their mean: h times the weight of the maps against the residual."""
    return _product([_renormalised(0.5 * a.sum(dim=1) + 0.5 * _eye(a)) for a in weights])


def last_layer_only(weights):
    """Only the last layer's Â: what the last layer reads, not what flowed up to it."""
    a = weights[-1]
    return _renormalised(0.5 * a.mean(dim=1) + 0.5 * _eye(a))
