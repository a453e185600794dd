"""The book's figures, drawn the same way in every chapter (titled, labelled, readable).

``use_book_style()`` (called once at the top of every chapter that draws) sizes figures and
fonts for the book's column, and makes the notebook emit SVG with real text:

- the column of the website is 688 CSS px wide on a desktop; a figure at most ``MAX_WIDTH_IN``
  = 7 inches wide is 672 CSS px (96 px per inch), so it is shown at its natural size, never
  shrunk;
- every text is at least ``MIN_FONT_PT`` = 10 pt, that is 13.3 CSS px at natural size, and its
  sub- and superscripts (mathtext draws them at 70%) 9.3 px;
- on a phone the stylesheet (book/_static/mhsa.css) shows a figure at its natural size too, in a
  box that scrolls sideways, instead of shrinking it to a third; SVG stays sharp when pinched.

tests/test_browser_figures.py measures the rendered text on every page at 1280 and 390 px.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Perceptually uniform and readable with colour-blindness; brighter (yellow) = more attention.
CMAP = "viridis"

COLORBAR_LABEL = "attention weight (unitless; each row sums to 1)"
MAX_WIDTH_IN = 7.0   # 672 CSS px: the desktop column (688 px) shows it unscaled
MIN_FONT_PT = 10     # 13.3 CSS px; mathtext scripts at 70%: 9.3 px

BOOK_RC = {
    "figure.figsize": (6.4, 4.0),
    "font.size": MIN_FONT_PT,
    "axes.titlesize": 11,
    "axes.labelsize": MIN_FONT_PT,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
    "legend.title_fontsize": MIN_FONT_PT,
    "figure.titlesize": 12,
    # Text stays text in the SVG: sharp at any zoom, selectable, and measurable in the browser.
    "svg.fonttype": "none",
}


def use_book_style() -> None:
    """Apply the book's figure style; in a notebook, also show figures as SVG.

    Sets ``BOOK_RC`` in matplotlib's rcParams. Font sizes given explicitly in a plotting call
    override it: keep them at ``MIN_FONT_PT`` or more.
    """
    import matplotlib as mpl

    mpl.rcParams.update(BOOK_RC)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is None:
        return
    try:  # comes with ipykernel; a terminal IPython may lack it, and has no inline figures
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    set_matplotlib_formats("svg")


def attention_heatmap(
    weights: np.ndarray,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str,
    ax=None,
    annotate: bool = True,
    colorbar: bool = True,
):
    """Draw a (queries x keys) weight matrix with labelled axes and a colour bar.

    Rows are the attending tokens (queries), columns the attended-to tokens (keys); each row
    sums to 1. Returns the matplotlib Axes. ``colorbar=False`` leaves the colour bar out, for a
    grid of heatmaps that shares one (``fig.colorbar(axes[0].images[0], ax=axes)``).
    """
    import matplotlib.pyplot as plt

    weights = np.asarray(weights)
    if weights.shape != (len(query_labels), len(key_labels)):
        raise ValueError(
            f"weights has shape {weights.shape} but there are {len(query_labels)} query labels "
            f"and {len(key_labels)} key labels"
        )
    if ax is None:
        size = (min(MAX_WIDTH_IN, 1.0 + 0.55 * len(key_labels)), 0.8 + 0.45 * len(query_labels))
        _, ax = plt.subplots(figsize=size, layout="constrained")
    image = ax.imshow(weights, cmap=CMAP, vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_labels)), key_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(query_labels)), query_labels)
    ax.set_xlabel("key: the token attended to")
    ax.set_ylabel("query: the token attending")
    ax.set_title(title)
    if annotate and weights.size <= 150:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=MIN_FONT_PT,
                    color="black" if w > 0.5 else "white")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=COLORBAR_LABEL)
    return ax
