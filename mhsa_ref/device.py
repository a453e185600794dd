"""Where the PyTorch chapters run: the best device this machine has (cuda > mps > cpu)."""

from __future__ import annotations

from typing import Any


def pick_device() -> Any:
    """Return ``torch.device`` for cuda, else mps, else cpu; the string "cpu" without torch.

    The NumPy chapters run the same setup cell, so a missing torch is not an error here.
    """
    try:
        import torch
    except ImportError:
        return "cpu"
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
