"""Chapter 05 bugs as learners make them (standalone modules; nothing imported from tests/ch05)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

MHSA = "05.MultiHeadSelfAttention"
CONVERT = "05.from_torch_mha"


class _Base(nn.Module):
    """A correct module whose steps subclasses get wrong, one at a time."""

    def __init__(self, d_model, num_heads, bias=True, dropout=0.0):
        super().__init__()
        self.d, self.h, self.dh = d_model, num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def heads(self, t):
        B, L, _ = t.shape
        return t.view(B, L, self.h, self.dh).transpose(1, 2)

    def qkv(self, x):
        return self.heads(self.W_q(x)), self.heads(self.W_k(x)), self.heads(self.W_v(x))

    def scale(self):
        return 1.0 / math.sqrt(self.dh)

    def attend(self, s, mask):
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, dim=-1)
        return torch.nan_to_num(w, nan=0.0)

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.transpose(-2, -1) * self.scale(), mask)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, L, self.d))


class IgnoresMask(_Base):
    def attend(self, s, mask):
        return torch.softmax(s, dim=-1)


class NoScale(_Base):
    def scale(self):
        return 1.0


class ProjectionsWithoutBias(_Base):
    """F.linear with the weights only (biases forgotten)."""

    def qkv(self, x):
        return tuple(self.heads(F.linear(x, W.weight)) for W in (self.W_q, self.W_k, self.W_v))


class DetachedInput(_Base):
    """Detaches x 'to save memory'."""

    def forward(self, x, mask=None):
        return super().forward(x.detach(), mask)


class NaNRows(_Base):
    def attend(self, s, mask):
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1)


class SoftmaxOverQueries(_Base):
    def attend(self, s, mask):
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)


class ValuesFromKeyProjection(_Base):
    def qkv(self, x):
        return self.heads(self.W_q(x)), self.heads(self.W_k(x)), self.heads(self.W_k(x))


class MaskReadAsBlocked(_Base):
    def attend(self, s, mask):
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)


class OutputProjectionSkipped(_Base):
    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.transpose(-2, -1) * self.scale(), mask)
        return (w @ v).transpose(1, 2).reshape(B, L, self.d)


class ResidualAdded(_Base):
    """Adds a residual connection inside the attention module."""

    def forward(self, x, mask=None):
        return x + super().forward(x, mask)


class KeysDotT(_Base):
    """`k.T` on the (B, h, L, d_h) keys, as for a matrix."""

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.T * self.scale(), mask)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, L, self.d))


class KeysDotLowerT(_Base):
    """`k.t()`: PyTorch refuses it on more than 2 axes."""

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.t() * self.scale(), mask)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, L, self.d))


class KeysTransposedAlongHeads(_Base):
    """`k.transpose(1, 2)`: the head and position axes swapped where the last two were meant."""

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.transpose(1, 2) * self.scale(), mask)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, L, self.d))


class MergeWithoutTranspose(_Base):
    """Splits right; merges the (B, h, L, d_h) heads with a plain reshape."""

    def forward(self, x, mask=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        w = self.attend(q @ k.transpose(-2, -1) * self.scale(), mask)
        return self.W_o((w @ v).reshape(B, L, self.d))


# --- converters ---------------------------------------------------------------------------

def _copy(mha, blocks, out_t=False, biases=True):
    d = mha.embed_dim
    has_bias = mha.in_proj_bias is not None
    m = _Base(d, mha.num_heads, bias=has_bias)
    with torch.no_grad():
        for name, block in zip(("W_q", "W_k", "W_v"), blocks):
            getattr(m, name).weight.copy_(mha.in_proj_weight[block * d:(block + 1) * d])
            if has_bias and biases:
                getattr(m, name).bias.copy_(mha.in_proj_bias[block * d:(block + 1) * d])
        m.W_o.weight.copy_(mha.out_proj.weight.T if out_t else mha.out_proj.weight)
        if has_bias and biases:
            m.W_o.bias.copy_(mha.out_proj.bias)
    m.__class__ = type("MultiHeadSelfAttention", (_Base,), {})
    return m


def convert_v_k_q(mha):
    """Assumes in_proj_weight is stacked v, k, q."""
    return _copy(mha, (2, 1, 0))


def convert_forgets_biases(mha):
    """Copies the weights and leaves the biases at their fresh initialisation."""
    return _copy(mha, (0, 1, 2), biases=False)


def convert_query_block_everywhere(mha):
    """Uses the first block for q, k and v."""
    return _copy(mha, (0, 0, 0))


def convert_out_proj_transposed(mha):
    return _copy(mha, (0, 1, 2), out_t=True)


BUGS = [(MHSA, c) for c in (IgnoresMask, NoScale, ProjectionsWithoutBias, DetachedInput, NaNRows,
                            SoftmaxOverQueries, ValuesFromKeyProjection, MaskReadAsBlocked,
                            OutputProjectionSkipped, ResidualAdded, KeysDotT, KeysDotLowerT,
                            MergeWithoutTranspose, KeysTransposedAlongHeads)] + \
       [(CONVERT, f) for f in (convert_v_k_q, convert_forgets_biases, convert_query_block_everywhere,
                               convert_out_proj_transposed)]
