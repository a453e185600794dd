"""Chapter 06 bugs as learners make them (standalone; nothing imported from tests/ch06)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LN = "06.layer_norm"
BLOCK = "06.TransformerBlock"


def ln_no_beta(x, gamma, beta, eps=1e-5):
    """Scales by gamma and forgets the shift."""
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma


def ln_gamma_beta_swapped(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * beta + gamma


def ln_eps_hard_coded(x, gamma, beta, eps=1e-5):
    """Uses 1e-5 whatever eps is passed."""
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * gamma + beta


def ln_no_eps(x, gamma, beta, eps=1e-5):
    """Drops eps: 0/0 on a constant row."""
    mu = x.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True)) * gamma + beta


def ln_divides_by_variance(x, gamma, beta, eps=1e-5):
    """Divides by the variance, not the standard deviation."""
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / (x.var(axis=-1, keepdims=True) + eps) * gamma + beta


def ln_first_axis(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=0, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=0, keepdims=True) + eps) * gamma + beta


def ln_sample_std(x, gamma, beta, eps=1e-5):
    """np.std(ddof=1) 'because that is the standard deviation'."""
    mu = x.mean(axis=-1, keepdims=True)
    sd = x.std(axis=-1, ddof=1, keepdims=True)
    return (x - mu) / np.sqrt(sd ** 2 + eps) * gamma + beta


def ln_not_centred(x, gamma, beta, eps=1e-5):
    """RMSNorm by accident: divides by the std and never subtracts the mean."""
    return x / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma + beta


# --- Transformer block ---------------------------------------------------------------------

class _Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mask=None):
        B, L, d = x.shape
        q, k, v = (W(x).view(B, L, self.h, d // self.h).transpose(1, 2) for W in (self.W_q, self.W_k, self.W_v))
        s = q @ k.transpose(-1, -2) / math.sqrt(d // self.h)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, L, d))


class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = _Attn(d_model, num_heads)
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def sa(self, x, mask):
        return self.attn(x, mask)

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.ln1(x), mask)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x + self.sa(x, mask))
        return self.ln2(x + self.ff(x))


class BlockWithoutMask(_Block):
    def sa(self, x, mask):
        return self.attn(x)


class BlockAlwaysPreLN(_Block):
    def forward(self, x, mask=None):
        x = x + self.sa(self.ln1(x), mask)
        return x + self.ff(self.ln2(x))


class BlockLn2Forgotten(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.ln1(x), mask)
            return x + self.ff(x)
        x = self.ln1(x + self.sa(x, mask))
        return x + self.ff(x)


class BlockAttentionTwice(_Block):
    """Adds the attention output twice (copy-paste)."""

    def forward(self, x, mask=None):
        if self.norm_first:
            a = self.sa(self.ln1(x), mask)
            x = x + a + a
            return x + self.ff(self.ln2(x))
        return super().forward(x, mask)


class BlockDetachedResidual(_Block):
    """Detaches the residual path 'so that only the sublayers learn'."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x.detach() + self.sa(self.ln1(x), mask)
            return x + self.ff(self.ln2(x))
        x = self.ln1(x.detach() + self.sa(x, mask))
        return self.ln2(x + self.ff(x))


class BlockNoFFResidual(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.ln1(x), mask)
            return self.ff(self.ln2(x))
        x = self.ln1(x + self.sa(x, mask))
        return self.ln2(self.ff(x))


class BlockSiLU(_Block):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        self.ff[1] = nn.SiLU()


BUGS = [(LN, f) for f in (ln_no_beta, ln_gamma_beta_swapped, ln_eps_hard_coded, ln_no_eps,
                          ln_divides_by_variance, ln_first_axis, ln_sample_std, ln_not_centred)] + \
       [(BLOCK, c) for c in (BlockWithoutMask, BlockAlwaysPreLN, BlockLn2Forgotten, BlockAttentionTwice,
                             BlockDetachedResidual, BlockNoFFResidual, BlockSiLU)]
