"""A small Transformer whose heads can be looked at and switched off (used by chapters 09, 10).

Chapters 05 and 06 built ``MultiHeadSelfAttention`` and ``TransformerBlock`` to compute; the
later chapters need to see inside them. ``InspectableAttention`` is chapter 05's module with
two additions, both on the explicit path (the fused kernel returns no weights):

- it keeps what the last forward pass computed: ``weights`` (B, h, L, L), the attention maps,
  and ``head_outputs`` (B, h, L, d_h), each head's output before ``W_o`` mixes them;
- it multiplies head i's output by ``gate[i]`` before ``W_o``: the gate ξ of Michel, Levy &
  Neubig (2019). A gate of 0 removes a head; the gradient of the loss with respect to a gate
  of 1 is that head's importance.

``TinyTransformer`` stacks chapter 06's blocks (Pre-LN) over token embeddings (``vocab_size``)
or over vectors (``d_input``, e.g. image patches), with learned positions and one gate per head
in ``head_gates`` (n_layers, h). With ``relative_positions=True`` it also learns one score bias
per head and per offset (key minus query), added to the attention scores as T5 and Enformer do:
the simplest way for a head to learn "look g positions back" (chapter 10's DNA motifs).
"""

from __future__ import annotations

import torch
from torch import nn

from ..ch05.reference_torch import MultiHeadSelfAttention
from .reference_torch import TransformerBlock

__all__ = ["InspectableAttention", "TinyTransformer"]


class InspectableAttention(MultiHeadSelfAttention):
    """``MultiHeadSelfAttention`` that keeps its attention maps and head outputs and gates heads."""

    fast = False  # the explicit path: the only one that has the weights to keep

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, bias=bias)
        self.gate: torch.Tensor | None = None  # (h,), set by TinyTransformer; None = all ones
        self.score_bias: torch.Tensor | None = None  # (h, L, L) added to the scores; None = none
        self.weights: torch.Tensor | None = None
        self.head_outputs: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        B, L, _ = self._check_input(x)
        mask = self._check_mask(mask, B, L, x.device)
        if is_causal:
            causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
            mask = causal if mask is None else mask & causal
        q, k, v = self._project(x)
        scores = q @ k.transpose(-2, -1) / self.d_head ** 0.5
        if self.score_bias is not None:
            scores = scores + self.score_bias
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:  # a row with no allowed key attends to nothing (not NaN)
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        heads = weights @ v
        # kept for looking, not for differentiating: a kept graph would pin memory (and block deepcopy)
        self.weights, self.head_outputs = weights.detach(), heads.detach()
        if self.gate is not None:
            heads = heads * self.gate.view(1, -1, 1, 1)
        return self.W_o(self._merge(heads))


class TinyTransformer(nn.Module):
    """Embeddings + learned positions + ``n_layers`` Pre-LN blocks + a final LayerNorm.

    ``forward(x, mask=None)``: ``x`` is (B, L) token ids when built with ``vocab_size``, or
    (B, L, d_input) vectors when built with ``d_input``; returns the hidden states (B, L, d).
    ``mask`` is a boolean mask (True = may attend) broadcastable to (B, h, L, L).
    ``attention_maps()`` and ``head_outputs()`` return what each layer kept on the last call.
    """

    def __init__(self, d_model: int, num_heads: int, n_layers: int, max_len: int, *,
                 vocab_size: int | None = None, d_input: int | None = None, d_ff: int | None = None,
                 relative_positions: bool = False) -> None:
        super().__init__()
        if (vocab_size is None) == (d_input is None):
            raise ValueError("give exactly one of vocab_size (token ids) and d_input (vectors), "
                             f"got vocab_size={vocab_size}, d_input={d_input}")
        self.embed = nn.Embedding(vocab_size, d_model) if vocab_size else nn.Linear(d_input, d_model)
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            block = TransformerBlock(d_model, num_heads, d_ff or 4 * d_model)
            block.attn = InspectableAttention(d_model, num_heads)
            self.blocks.append(block)
        self.ln = nn.LayerNorm(d_model)
        self.max_len = max_len
        # ones; requires_grad_(True) on it to measure head importance, zeros to prune
        self.head_gates = nn.Parameter(torch.ones(n_layers, num_heads), requires_grad=False)
        # rel_bias[l, i, max_len - 1 + j - i]: layer l, head i's bias for a key j - i positions away
        self.rel_bias = (nn.Parameter(torch.zeros(n_layers, num_heads, 2 * max_len - 1))
                         if relative_positions else None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        L = x.shape[1]
        if L > self.max_len:
            raise ValueError(f"x has length {L}, more than max_len={self.max_len} learned positions")
        return self.encode(self.embed(x) + self.pos[:L], mask)

    def encode(self, h: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The blocks and the final LayerNorm on vectors already embedded, (B, L, d_model).

        ``forward`` is ``encode(embed(x) + pos[:L])``; a model that builds its own input (a
        class token in front, positions left out: chapter 10's ViT) calls this directly.
        """
        if h.ndim != 3 or h.shape[-1] != self.ln.normalized_shape[0]:
            raise ValueError(f"h must be (B, L, d_model={self.ln.normalized_shape[0]}), got shape {tuple(h.shape)}")
        L = h.shape[1]
        if self.rel_bias is not None:
            if L > self.max_len:
                raise ValueError(f"h has length {L}, more than max_len={self.max_len} relative offsets allow")
            i = torch.arange(L, device=h.device)
            offsets = i[None, :] - i[:, None] + self.max_len - 1  # (L, L): key j - query i, shifted
        for layer, (gate, block) in enumerate(zip(self.head_gates, self.blocks)):
            block.attn.gate = gate
            block.attn.score_bias = None if self.rel_bias is None else self.rel_bias[layer][:, offsets]
            h = block(h, mask)
            block.attn.score_bias = None  # sized for this L: never left for a later call
            block.attn.gate = None  # a view of head_gates: with its gradient on, it holds the graph
        return self.ln(h)

    def attention_maps(self) -> list[torch.Tensor]:
        """One (B, h, L, L) tensor per layer, from the last forward pass."""
        return [block.attn.weights for block in self.blocks]

    def head_outputs(self) -> list[torch.Tensor]:
        """One (B, h, L, d_h) tensor per layer: each head's output before W_o, ungated."""
        return [block.attn.head_outputs for block in self.blocks]
