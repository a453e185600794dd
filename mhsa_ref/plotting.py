"""The book's figures, drawn the same way in every chapter (titled, labelled, readable)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Perceptually uniform and readable with colour-blindness; brighter (yellow) = more attention.
CMAP = "viridis"


def attention_heatmap(
    weights: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str,
    ax=None,
    annotate: bool = True,
):
    """Draw a (queries x keys) weight matrix with labelled axes and a colour bar.

    Rows are the attending tokens (queries), columns the attended-to tokens (keys); each row
    sums to 1. Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    weights = np.asarray(weights)
    if weights.shape != (len(query_labels), len(key_labels)):
        raise ValueError(
            f"weights has shape {weights.shape} but there are {len(query_labels)} query labels "
            f"and {len(key_labels)} key labels"
        )
    if ax is None:
        size = (1.0 + 0.55 * len(key_labels), 0.8 + 0.45 * len(query_labels))
        _, ax = plt.subplots(figsize=size, layout="constrained")
    image = ax.imshow(weights, cmap=CMAP, vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_labels)), key_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(query_labels)), query_labels)
    ax.set_xlabel("key: the token attended to")
    ax.set_ylabel("query: the token attending")
    ax.set_title(title)
    if annotate and weights.size <= 150:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if w > 0.5 else "white")
    ax.figure.colorbar(image, ax=ax, label="attention weight (unitless; each row sums to 1)")
    return ax
