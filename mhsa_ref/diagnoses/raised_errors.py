"""Errors the learner's code raised, named from where they came from: a transpose of every axis of
a batched array (``K.T`` on (B, L, d_k)) is a shape error a few lines later, or wrong numbers.

Reads the calls that raised (their error text ends with the learner's own line, as
``untrusted.calls.where`` writes it) beside the cases' inputs; never the learner's source itself.
"""

from __future__ import annotations

import re

import numpy as np

from .context import Diagnosis, _Ctx

# `.T`, `.t()`, `.transpose()` and `np.transpose(a)`: each reverses every axis of a NumPy array
# (`.t()` refuses more than 2 in PyTorch, `.T` is deprecated there but still reverses them all).
_ALL_AXES = re.compile(r"\.T\b|\.t\(\s*\)|\.transpose\(\s*\)|\bnp\.transpose\(\s*[\w.]+\s*\)")
_LINE = re.compile(r"\(line \d+: `(?P<code>.*)`\)$", re.DOTALL)


def _arrays(value: object) -> list[np.ndarray]:
    """The arrays in a case's arguments, also inside the tuples a module's harness takes."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays(v)]
    return []


def _batched(args: tuple) -> bool:
    return any(a.ndim > 2 for a in _arrays(args))


def _transposes_every_axis(error: str | None) -> bool:
    line = _LINE.search(error or "")
    return line is not None and _ALL_AXES.search(line.group("code")) is not None


def _transpose_of_batch(ctx: _Ctx) -> Diagnosis | None:
    """Every failing case has batched inputs, and at least one raised on a line that transposes
    every axis: the transpose meant for a matrix met a stack of them."""
    failing = [ctx.cases[i] for i in ctx.failing()]
    raised = [ctx.outcomes[i] for i in ctx.failing() if not ctx.outcomes[i].returned]
    if not failing or not all(_batched(c.args) for c in failing):
        return None
    if not raised or not all(_transposes_every_axis(o.error) for o in raised):
        return None
    return Diagnosis("transpose-all-axes",
                     "`.T` reverses all axes of a batched array: K of shape (B, L, d_k) becomes (d_k, L, B), "
                     "not (B, d_k, L), and the product fails or mixes the batch. Swap only the last two axes: "
                     "np.swapaxes(K, -2, -1) in NumPy, K.transpose(-2, -1) in PyTorch.")
