"""Reference for chapter 09, NumPy part: linear CKA (Kornblith et al. 2019).

Two representations of the same n examples, X (n, p1) and Y (n, p2), are compared through their
Gram matrices K = X Xᵀ and L = Y Yᵀ (n, n), which say how each representation sees the examples
relative to each other and do not depend on how its features are named or rotated. With the
columns centred (Xc = X - mean over examples), linear CKA is the cosine between the Gram matrices:

    CKA(X, Y) = <Kc, Lc>_F / (||Kc||_F ||Lc||_F)
              = ||Ycᵀ Xc||_F² / (||Xcᵀ Xc||_F · ||Ycᵀ Yc||_F)

The second line (Kornblith et al. 2019, eq. 5) never builds an (n, n) matrix: <Kc, Lc>_F =
tr(Xc Xcᵀ Yc Ycᵀ) = ||Ycᵀ Xc||_F², and ||Kc||_F = ||Xcᵀ Xc||_F likewise. It is the biased (plain)
HSIC estimator's normalised form, which is what "linear CKA" names in that paper.
"""

from __future__ import annotations

import numpy as np

__all__ = ["linear_cka"]


def _as_features(A: object, name: str) -> np.ndarray:
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n examples, p features), got shape {arr.shape}")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 examples and 1 feature, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or inf")
    return arr


def linear_cka(X: object, Y: object) -> float:
    """Linear CKA of X (n, p1) and Y (n, p2), two representations of the same n examples: a float
    in [0, 1], 1 when one is an orthogonal map of the other (up to scale and translation)."""
    X, Y = _as_features(X, "X"), _as_features(Y, "Y")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X {X.shape} and Y {Y.shape} must hold the same number of examples (rows): "
                         f"{X.shape[0]} != {Y.shape[0]}")
    Xc = X - X.mean(axis=0)  # new arrays: the caller's stay as they were
    Yc = Y - Y.mean(axis=0)
    norm_x = np.linalg.norm(Xc.T @ Xc)  # = ||Xc Xcᵀ||_F, the centred Gram matrix's norm
    norm_y = np.linalg.norm(Yc.T @ Yc)
    for name, arr, norm in (("X", X, norm_x), ("Y", Y, norm_y)):
        if norm == 0.0:
            raise ValueError(f"{name} {arr.shape} is the same for every example (nothing is left once its "
                             "columns are centred): CKA is undefined")
    cka = np.linalg.norm(Yc.T @ Xc) ** 2 / (norm_x * norm_y)
    return float(min(max(cka, 0.0), 1.0))  # clip only rounding: Cauchy-Schwarz bounds it by 1
