"""Reference for chapter 09, PyTorch part: the orthogonality penalty between heads, and the
entropy of each head's attention rows (the stretch exercise).

A projection W (d_model, d_model) in ``nn.Linear`` layout computes x Wᵀ, so output feature i is
row i of W dotted with x. Head h owns the output features h·d_h … (h+1)·d_h - 1, that is the ROWS
W_h = W[h·d_h:(h+1)·d_h] (d_h, d_model): the directions of the input that head h reads. Two heads
read disjoint parts of the input when every row of one is orthogonal to every row of the other,
that is when W_h W_h'ᵀ (d_h, d_h) is zero. The penalty adds up how far each pair is from that:

    P(W) = sum over pairs h < h' of ||W_h W_h'ᵀ||_F²

which is (||W Wᵀ||_F² - sum_h ||W_h W_hᵀ||_F²) / 2: the off-diagonal blocks of W Wᵀ, each pair
once. (Li et al. 2018 regularise the heads' disagreement; this is the weight-space version the
chapter tests.)
"""

from __future__ import annotations

import numbers

import torch

__all__ = ["orthogonality_penalty", "attention_entropy"]


def _check(W: torch.Tensor, num_heads: int) -> int:
    if not isinstance(W, torch.Tensor):
        raise TypeError(f"W must be a torch.Tensor, got {type(W).__name__}")
    if W.dim() != 2 or W.shape[0] != W.shape[1] or not W.is_floating_point():
        raise ValueError(f"W must be a square floating-point weight (d_model, d_model), got {W.dtype} of shape "
                         f"{tuple(W.shape)}")
    if isinstance(num_heads, bool) or not isinstance(num_heads, numbers.Integral) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    if W.shape[0] % num_heads:
        raise ValueError(f"d_model={W.shape[0]} (W of shape {tuple(W.shape)}) is not divisible by "
                         f"num_heads={num_heads}")
    return W.shape[0] // int(num_heads)


def orthogonality_penalty(W: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Sum over pairs of heads h < h' of ||W_h W_h'ᵀ||_F², head h owning rows h·d_h:(h+1)·d_h of
    W (d_model, d_model): a differentiable 0-d tensor of W's dtype, on W's device."""
    d_h = _check(W, num_heads)
    heads = W.reshape(-1, d_h, W.shape[1])  # a view: row blocks, one per head
    overlap = heads.unsqueeze(1) @ heads.transpose(1, 2).unsqueeze(0)  # (h, h', d_h, d_h): W_h W_h'ᵀ
    per_pair = overlap.square().sum(dim=(-2, -1))  # (h, h')
    return per_pair.triu(diagonal=1).sum()  # each pair once, no h = h'


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean entropy, in nats, of each head's attention rows: weights (B, h, L, L) -> (h,).

    Row (b, i) of head h is a distribution over keys; its entropy -sum_j p log p (with 0 log 0 = 0)
    is 0 for a head that looks at one key and log L for one that spreads evenly over L keys. The
    mean runs over every row of the head, in every batch item, except rows of all zeros (a
    masked query, which attends nowhere). A head with no such row gets NaN (0 / 0).
    """
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"weights must be a torch.Tensor, got {type(weights).__name__}")
    if weights.dim() != 4 or not weights.is_floating_point():
        raise ValueError(f"weights must be a floating-point tensor (B, h, L, L), got {weights.dtype} of shape "
                         f"{tuple(weights.shape)}")
    per_row = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (B, h, L); xlogy(0, 0) = 0
    attends = (weights != 0).any(dim=-1)  # (B, h, L): False for a masked query's all-zero row
    return (per_row * attends).sum(dim=(0, 2)) / attends.sum(dim=(0, 2))
