"""Chapter 05's known mistakes, written the way learners write them (PyTorch modules).

Kept apart from ``exercises.py`` so that loading the exercise registry does not import PyTorch: the
NumPy chapters' ``check`` stays quick, and the package works without torch installed.
Each class is the reference module with one thing done wrong.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .reference_torch import FusedQKVSelfAttention, MultiHeadSelfAttention, from_torch_mha


class MaskInverted(MultiHeadSelfAttention):
    """Blocks where the mask says True (nn.MultiheadAttention's convention)."""

    def _check_mask(self, mask, B, L, device):
        mask = super()._check_mask(mask, B, L, device)
        return None if mask is None else ~mask


class MaskInvertedInAttentionOnly(MultiHeadSelfAttention):
    """Inverted where the scores are masked, but empty rows still found with the right mask."""

    def forward(self, x, mask=None):
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        q, k, v = self._project(x)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
        if mask is not None:
            heads = heads.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.W_o(self._merge(heads))


class EmptyRowsFilled(MultiHeadSelfAttention):
    """The explicit path with ``fill`` for blocked scores and no fix for rows with no allowed key:
    -inf gives NaN there, a large negative number gives uniform weights."""

    fast = False
    fill = float("-inf")

    def _attend(self, q, k, v, mask, p):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, self.fill)
        return torch.softmax(scores, dim=-1) @ v

    def forward(self, x, mask=None):
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        q, k, v = self._project(x)
        return self.W_o(self._merge(self._attend(q, k, v, mask, 0.0)))


class EmptyRowsNaN(EmptyRowsFilled):
    pass


class EmptyRowsUniform(EmptyRowsFilled):
    fill = -1e9


class MaskInvertedNaN(MaskInverted, EmptyRowsNaN):
    """Inverted, and with the explicit path rows with no allowed key come out as NaN."""


class MaskIgnored(MultiHeadSelfAttention):
    def _check_mask(self, mask, B, L, device):
        super()._check_mask(mask, B, L, device)
        return None


class ScaleSqrtDModel(MultiHeadSelfAttention):
    """Scores divided by sqrt(d_model) instead of sqrt(d_h)."""

    def _project(self, x):
        q, k, v = super()._project(x)
        return q * math.sqrt(self.d_head / self.d_model), k, v


class _Explicit(MultiHeadSelfAttention):
    fast = False  # so that _split and _merge are the ones used


class SplitViewNoTranspose(_Explicit):
    """(B, L, d).view(B, h, L, d_h): cuts the sequence, not the width, into heads."""

    def _split(self, t):
        B, L, _ = t.shape
        return t.reshape(B, self.num_heads, L, self.d_head)


class SplitAndMergeViewNoTranspose(SplitViewNoTranspose):
    def _merge(self, t):
        B, _, L, _ = t.shape
        return t.reshape(B, L, self.d_model)


class MergeViewNoTranspose(_Explicit):
    def _merge(self, t):
        B, _, L, _ = t.shape
        return t.reshape(B, L, self.d_model)


class SoftmaxOverQueries(_Explicit):
    """softmax(dim=-2): each key's weights sum to 1 over the queries (NaN, for a key no query
    may see, made 0)."""

    def _attend(self, q, k, v, mask, p):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(scores, dim=-2), nan=0.0) @ v


class FloatMaskAdded(MultiHeadSelfAttention):
    """The mask handed to F.scaled_dot_product_attention as floats (``mask.float()``): a float
    mask is added to the scores, so True gets +1 and nothing is blocked."""

    fix_empty_rows = False

    def forward(self, x, mask=None):
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        q, k, v = self._project(x)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.to(q.dtype))
        if mask is not None and self.fix_empty_rows:
            heads = heads.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.W_o(self._merge(heads))


class FloatMaskAddedRowsFixed(FloatMaskAdded):
    fix_empty_rows = True


class NoOutputProjection(MultiHeadSelfAttention):
    def forward(self, x, mask=None):
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        q, k, v = self._project(x)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if mask is not None:
            heads = heads.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self._merge(heads)


# --- from_torch_mha -----------------------------------------------------------------------------

def from_torch_mha_wrong(order: tuple[int, int, int], transpose_in: bool, transpose_out: bool, mha):
    """from_torch_mha that takes in_proj_weight's q, k, v blocks in ``order`` and/or copies the
    weights transposed."""
    module = from_torch_mha(mha)
    with torch.no_grad():
        ws = mha.in_proj_weight.chunk(3)
        bs = mha.in_proj_bias.chunk(3) if mha.in_proj_bias is not None else None
        for linear, i in zip((module.W_q, module.W_k, module.W_v), order):
            linear.weight.copy_(ws[i].T if transpose_in else ws[i])
            if bs is not None:
                linear.bias.copy_(bs[i])
        module.W_o.weight.copy_(mha.out_proj.weight.T if transpose_out else mha.out_proj.weight)
    return module


# 05.FusedQKVSelfAttention: the fused projection's output cut along the wrong axes.


class FusedHeadsOutermost(FusedQKVSelfAttention):
    """view(B, L, h, 3, d_h): as if each head's q, k, v sat side by side (Megatron's layout)."""

    def _project(self, x):
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, self.num_heads, 3, self.d_head)
        return qkv.permute(3, 0, 2, 1, 4).unbind(0)


class FusedInterleaved(FusedQKVSelfAttention):
    """view(B, L, d, 3): q, k and v taken as every third column."""

    def _project(self, x):
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, self.num_heads, self.d_head, 3)
        return qkv.permute(4, 0, 2, 1, 3).unbind(0)


class FusedScaleSqrtDModel(FusedQKVSelfAttention):
    def _project(self, x):
        q, k, v = super()._project(x)
        return q * math.sqrt(self.d_head / self.d_model), k, v


class FusedEmptyRowsNaN(FusedQKVSelfAttention, EmptyRowsNaN):
    """The fused projection, and rows with no allowed key left as 0/0 = NaN."""


class FusedEmptyRowsUniform(FusedQKVSelfAttention, EmptyRowsUniform):
    """The fused projection, and rows with no allowed key spread evenly (a -1e9 fill)."""
