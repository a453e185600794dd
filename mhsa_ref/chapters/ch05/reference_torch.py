"""Reference for chapter 05: multi-head self-attention as a PyTorch module.

The maths is chapter 04's, moved to torch: project ``x`` to queries, keys and values, split
the width ``d`` into ``h`` heads of ``d_h = d / h`` columns, attend in every head with the scale
``1 / sqrt(d_h)``, merge the heads and mix them with ``W_o`` (Vaswani et al., 2017). Two things
change on the way:

- ``nn.Linear`` stores its weight as (d_out, d_in) and computes ``x @ weight.T + bias``, so
  chapter 04's NumPy ``W`` (d_in, d_out) is ``linear.weight.T``.
- ``nn.MultiheadAttention`` packs W_q, W_k, W_v into one ``in_proj_weight`` (3d, d), rows in
  the order q, k, v, and its boolean ``attn_mask`` means the opposite of ours: True = blocked.
  ``from_torch_mha`` and ``mha_mask`` translate.

The module has two paths that compute the same thing: the fast one calls
``F.scaled_dot_product_attention`` (a fused kernel: FlashAttention-style on GPUs, a blocked one
on CPUs), the explicit one spells the maths out and is the one to read. ``fast`` chooses.

Conventions (DESIGN.md): batch first, (B, L, d); boolean masks with True = "may attend",
broadcastable to (B, h, L, L); a query with no allowed key gets a zero output, never NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MultiHeadSelfAttention", "FusedQKVSelfAttention", "from_torch_mha", "to_torch_mha", "mha_mask"]


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention: ``forward(x, mask=None, is_causal=False)`` maps (B, L, d) to
    (B, L, d).

    ``dropout`` is applied to the attention weights in training mode only.
    """

    fast: bool = True  # F.scaled_dot_product_attention; False: the explicit path below

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={value!r}")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got dropout={dropout}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.dropout = float(dropout)
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        """``is_causal=True`` is the causal mask said as a flag, not a tensor: the only form in
        which SDPA may pick its FlashAttention kernel (a mask tensor rules it out)."""
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        if not isinstance(is_causal, bool):
            raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
        if is_causal and mask is not None:
            raise ValueError("pass either mask or is_causal=True, not both: combine a causal mask "
                             "with yours (mask & causal) and pass that as mask")
        q, k, v = self._project(x)
        p = self.dropout if self.training else 0.0
        if self.fast:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal)
        else:
            if is_causal:  # the explicit path has no flag: spell the mask out
                mask = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
            heads = self._attend(q, k, v, mask, p)
        if mask is not None:  # not every kernel agrees on rows with no allowed key: make them 0
            heads = heads.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.W_o(self._merge(heads))

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v, each (B, h, L, d_h): head i owns columns i*d_h:(i+1)*d_h of its projection."""
        B, L, d = x.shape
        if self.fast:  # one matmul of width 3d instead of three of width d, as nn.MultiheadAttention does
            weight = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
            bias = None if self.W_q.bias is None else torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
            qkv = F.linear(x, weight, bias).view(B, L, 3, self.num_heads, self.d_head)
            return qkv.permute(2, 0, 3, 1, 4).unbind(0)
        return tuple(self._split(W(x)) for W in (self.W_q, self.W_k, self.W_v))

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        """(B, L, d) -> (B, h, L, d_h). The transpose matters: a bare view would cut the
        sequence, not the width, into heads."""
        B, L, _ = t.shape
        return t.view(B, L, self.num_heads, self.d_head).transpose(1, 2)

    def _merge(self, t: torch.Tensor) -> torch.Tensor:
        """(B, h, L, d_h) -> (B, L, d): the inverse of ``_split``."""
        B, _, L, _ = t.shape
        return t.transpose(1, 2).reshape(B, L, self.d_model)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None, p: float) -> torch.Tensor:
        """The explicit path: softmax(q k^T / sqrt(d_h), masked) v, in every head at once."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:  # all -inf gives 0/0 = NaN: such rows attend to nothing
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        if p > 0.0:
            weights = F.dropout(weights, p)
        return weights @ v

    def _check_input(self, x: object) -> tuple[int, int, int]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor of shape (B, L, d_model), got {type(x).__name__}")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, L, d_model={self.d_model}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
        return tuple(x.shape)

    def _check_mask(self, mask: object, B: int, L: int, device: torch.device) -> torch.Tensor | None:
        if mask is None:
            return None
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            what = f"dtype {mask.dtype}" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a boolean tensor (True = may attend), got {what}")
        target = (B, self.num_heads, L, L)
        try:
            if mask.ndim > 4 or torch.broadcast_shapes(mask.shape, target) != target:
                raise RuntimeError
        except RuntimeError:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to "
                             f"(B, h, L, L) = {target}") from None
        return mask.to(device)


class FusedQKVSelfAttention(MultiHeadSelfAttention):
    """``MultiHeadSelfAttention`` with W_q, W_k, W_v fused into one ``qkv = nn.Linear(d, 3d)``
    (as nanoGPT writes it): rows 0:d of ``qkv.weight`` are W_q's, d:2d W_k's, 2d:3d W_v's.

    So the last axis of ``qkv(x)`` is [q | k | v], each cut into h heads of d_h: one view to
    (B, L, 3, h, d_h) and one permute give q, k, v as (B, h, L, d_h), with no copy.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, bias=bias)  # no dropout: the exercise leaves it out
        del self.W_q, self.W_k, self.W_v  # one (3d, d) projection instead of three (d, d)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.num_heads, self.d_head)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)


def from_torch_mha(mha: nn.MultiheadAttention) -> MultiHeadSelfAttention:
    """A ``MultiHeadSelfAttention`` computing what ``mha(x, x, x)`` computes (outputs only).

    ``in_proj_weight`` is W_q, W_k, W_v stacked along the rows, in that order; both store
    (d_out, d_in), so the blocks copy over as they are. Masks still need ``mha_mask``.
    """
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"mha must be an nn.MultiheadAttention, got {type(mha).__name__}")
    if not mha.batch_first:
        raise ValueError("mha must be built with batch_first=True: with batch_first=False it reads "
                         "x as (L, B, d), and this module reads (B, L, d)")
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("mha must be plain self-attention: kdim == vdim == embed_dim, "
                         "add_bias_kv=False, add_zero_attn=False")
    bias = mha.in_proj_bias is not None
    new = MultiHeadSelfAttention(mha.embed_dim, mha.num_heads, bias=bias, dropout=mha.dropout)
    new = new.to(device=mha.in_proj_weight.device, dtype=mha.in_proj_weight.dtype)
    with torch.no_grad():
        for linear, w in zip((new.W_q, new.W_k, new.W_v), mha.in_proj_weight.chunk(3)):
            linear.weight.copy_(w)
        new.W_o.weight.copy_(mha.out_proj.weight)
        if bias:
            for linear, b in zip((new.W_q, new.W_k, new.W_v), mha.in_proj_bias.chunk(3)):
                linear.bias.copy_(b)
            new.W_o.bias.copy_(mha.out_proj.bias)
    return new.train(mha.training)


def to_torch_mha(module: MultiHeadSelfAttention) -> nn.MultiheadAttention:
    """The inverse of ``from_torch_mha``: an ``nn.MultiheadAttention(batch_first=True)`` with
    the same weights."""
    bias = module.W_q.bias is not None
    w = module.W_q.weight
    mha = nn.MultiheadAttention(module.d_model, module.num_heads, dropout=module.dropout, bias=bias,
                                batch_first=True, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight]))
        mha.out_proj.weight.copy_(module.W_o.weight)
        if bias:
            mha.in_proj_bias.copy_(torch.cat([module.W_q.bias, module.W_k.bias, module.W_v.bias]))
            mha.out_proj.bias.copy_(module.W_o.bias)
    return mha.train(module.training)


def mha_mask(mask: torch.Tensor, num_heads: int, batch_size: int | None = None) -> torch.Tensor:
    """Our self-attention mask (True = may attend, broadcastable to (B, h, L, L)) as
    ``nn.MultiheadAttention``'s ``attn_mask``: True = blocked, shaped (L, L) or (B * h, L, L)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError("mask must be a boolean tensor (True = may attend)")
    if mask.ndim <= 2:
        return ~mask
    if mask.ndim > 4:
        raise ValueError(f"mask must have at most 4 dimensions (B, h, L, S), got shape {tuple(mask.shape)}")
    mask = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
    B = batch_size if batch_size is not None else mask.shape[0]
    L = mask.shape[-1]  # self-attention: as many queries as keys
    return ~mask.expand(B, num_heads, L, L).reshape(B * num_heads, L, L)
