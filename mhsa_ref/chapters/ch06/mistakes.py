"""Chapter 06's known mistakes in the Transformer block, written the way learners write them.

Kept apart from ``exercises.py`` so that loading the exercise registry does not import PyTorch.
Each class is the reference block with one thing done wrong.
"""

from __future__ import annotations

from torch import nn

from .reference_torch import TransformerBlock


class NormPlacementFlipped(TransformerBlock):
    """Post-LN when norm_first=True is asked, and Pre-LN when it is not."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first=not norm_first)


class AlwaysPostLN(TransformerBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first=False)


class AlwaysPreLN(TransformerBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first=True)


class _Residuals(TransformerBlock):
    """The block with each residual connection switchable (keep_attn, keep_ff)."""

    keep_attn = keep_ff = True

    def forward(self, x, mask=None):
        if self.norm_first:
            a = self.attn(self.ln1(x), mask)
            x = x + a if self.keep_attn else a
            f = self.ff(self.ln2(x))
            return x + f if self.keep_ff else f
        a = self.attn(x, mask)
        x = self.ln1(x + a if self.keep_attn else a)
        f = self.ff(x)
        return self.ln2(x + f if self.keep_ff else f)


class NoAttentionResidual(_Residuals):
    keep_attn = False


class NoFeedForwardResidual(_Residuals):
    keep_ff = False


class NoResidual(_Residuals):
    keep_attn = keep_ff = False


class ReLU(TransformerBlock):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ff[1] = nn.ReLU()


class TanhGELU(TransformerBlock):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ff[1] = nn.GELU(approximate="tanh")


class OneLayerNormTwice(TransformerBlock):
    """ln1 used for both sublayers; ln2 is never used."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.ln1(x), mask)
            return x + self.ff(self.ln1(x))
        x = self.ln1(x + self.attn(x, mask))
        return self.ln1(x + self.ff(x))


class MaskNotPassed(TransformerBlock):
    """The attention sublayer called without the mask."""

    def forward(self, x, mask=None):
        return super().forward(x)
