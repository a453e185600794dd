"""Reference for chapter 06: the Transformer block (its LayerNorm, in NumPy, is ``reference.py``).

A block is two sublayers, attention then a position-wise feed-forward network, each wrapped in a
residual connection and a LayerNorm (Ba et al., 2016; Vaswani et al., 2017). Where the norm
sits is the difference between the two designs:

    Pre-LN  (norm_first=True):   x = x + attn(ln1(x));   x = x + ff(ln2(x))
    Post-LN (norm_first=False):  x = ln1(x + attn(x));   x = ln2(x + ff(x))

In Pre-LN the residual path from input to output is the identity, a "highway" that nothing
normalizes; in Post-LN every block's output passes through a LayerNorm. Xiong et al. (2020)
show what this does to the gradients at initialization; chapter 06 measures it.

The module matches ``nn.TransformerEncoderLayer(activation="gelu", batch_first=True)`` once the
weights are copied (``to_torch_encoder_layer``). Dropout, when asked for, is applied where that
layer applies it to the attention weights and to each sublayer's output.
"""

from __future__ import annotations

import torch
from torch import nn

from ..ch05.reference_torch import MultiHeadSelfAttention

__all__ = ["TransformerBlock", "to_torch_encoder_layer"]


class TransformerBlock(nn.Module):
    """One Transformer encoder block; ``forward(x, mask=None)`` maps (B, L, d) to (B, L, d)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = True) -> None:
        super().__init__()
        if isinstance(d_ff, bool) or not isinstance(d_ff, int) or d_ff < 1:
            raise ValueError(f"d_ff must be a positive int, got d_ff={d_ff!r}")
        self.norm_first = bool(norm_first)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout=dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)  # no parameters: the state dict is the contract's

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_first:
            x = x + self.drop(self.attn(self.ln1(x), mask))
            return x + self.drop(self.ff(self.ln2(x)))
        x = self.ln1(x + self.drop(self.attn(x, mask)))
        return self.ln2(x + self.drop(self.ff(x)))


def to_torch_encoder_layer(block: TransformerBlock) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` computing what ``block`` computes.

    Call it as ``layer(x, src_mask=mha_mask(mask, h))`` (``mha_mask`` is chapter 05's): its mask
    means True = blocked.
    """
    attn = block.attn
    w = attn.W_q.weight
    layer = nn.TransformerEncoderLayer(
        attn.d_model, attn.num_heads, block.ff[0].out_features, dropout=block.drop.p,
        activation="gelu", batch_first=True, norm_first=block.norm_first, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        sa = layer.self_attn
        sa.in_proj_weight.copy_(torch.cat([attn.W_q.weight, attn.W_k.weight, attn.W_v.weight]))
        sa.in_proj_bias.copy_(torch.cat([attn.W_q.bias, attn.W_k.bias, attn.W_v.bias]))
        sa.out_proj.load_state_dict(attn.W_o.state_dict())
        layer.linear1.load_state_dict(block.ff[0].state_dict())
        layer.linear2.load_state_dict(block.ff[2].state_dict())
        layer.norm1.load_state_dict(block.ln1.state_dict())
        layer.norm2.load_state_dict(block.ln2.state_dict())
    return layer.train(block.training)


