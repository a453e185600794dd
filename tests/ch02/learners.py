"""Chapter 02's exercise written as learners write it: correct in several styles, and wrong in
every way the registry names.

Every function here is written independently of the misconception variants in
``mhsa_ref/chapters/ch02/exercises.py`` (none are imported) and in other styles: Python loops
with a Kronecker delta, ``np.einsum``, ``np.diagflat``, broadcasting with ``[:, None]``. When the
judge names one of them correctly it has matched *behaviour*, not code. ``tests/test_contract.py``
proves it with these tables.
"""

from __future__ import annotations

import numpy as np

JACOBIAN = "02.softmax_jacobian"


# ============================================================================================
# Learner-style implementations
# ============================================================================================

# --- correct -------------------------------------------------------------------------------


def jacobian_loops(p):
    """Straight from dp_i/dx_j = p_i (delta_ij - p_j), one entry at a time."""
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            delta = 1.0 if i == j else 0.0
            J[i, j] = p[i] * (delta - p[j])
    return J


def jacobian_broadcast(p):
    """p_i times (I - 1 p^T), row by row through broadcasting."""
    n = p.shape[0]
    return p[:, None] * (np.eye(n) - p[None, :])


def jacobian_einsum(p):
    """diag(p) and p p^T, both with einsum."""
    eye = np.eye(p.size)
    return np.einsum("i,ij->ij", p, eye) - np.einsum("i,j->ij", p, p)


def jacobian_diagflat_fill(p):
    """Off-diagonal -p_i p_j first, then overwrite the diagonal with p_i (1 - p_i)."""
    J = -np.multiply.outer(p, p)
    np.fill_diagonal(J, p - p**2)
    return J


CORRECT_JACOBIAN = [jacobian_loops, jacobian_broadcast, jacobian_einsum, jacobian_diagflat_fill]

# --- wrong: each has exactly one mistake ---------------------------------------------------


def only_diagonal_loop(p):
    """Thinks p_i depends only on x_i: fills dp_i/dx_i = p_i (1 - p_i) and nothing else."""
    J = np.zeros((len(p), len(p)))
    for i in range(len(p)):
        J[i, i] = p[i] - p[i] ** 2
    return J


def only_diagonal_diagflat(p):
    """diag(p) alone: forgot the whole p p^T term."""
    return np.diagflat(p)


def sign_flipped(p):
    return p[:, None] * p[None, :] - np.diagflat(p)


def identity_minus_outer_loops(p):
    n = len(p)
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = (1.0 if i == j else 0.0) - p[i] * p[j]
    return J


def outer_only_einsum(p):
    return -np.einsum("a,b->ab", p, p)


def dot_instead_of_outer(p):
    """p.T does nothing to a 1-D array, so np.dot(p, p.T) is a number, not a matrix."""
    return np.diagflat(p) - np.dot(p, p.T)


def squares_broadcast(p):
    return np.diagflat(p) - p**2


def log_softmax_loops(p):
    """delta_ij - p_j: the derivative of log p_i, not of p_i."""
    n = len(p)
    return np.array([[(i == j) - p[j] for j in range(n)] for i in range(n)], dtype=float)


def jacobian_float32(p):
    p32 = p.astype(np.float32)
    return np.diag(p32) - np.outer(p32, p32)


def jacobian_in_place(p):
    """Right answer, but reuses the caller's array to hold the diagonal."""
    off = -np.outer(p, p)
    np.fill_diagonal(off, 0.0)
    p *= 1 - p  # p_i (1 - p_i), written into p itself
    return off + np.diag(p)


WRONG_JACOBIAN = [
    ("jacobian-diagonal-only", only_diagonal_loop),
    ("jacobian-diagonal-only", only_diagonal_diagflat),
    ("jacobian-sign-flipped", sign_flipped),
    ("jacobian-identity-minus-outer", identity_minus_outer_loops),
    ("jacobian-outer-only", outer_only_einsum),
    ("jacobian-not-outer-product", dot_instead_of_outer),
    ("jacobian-not-outer-product", squares_broadcast),
    ("jacobian-log-softmax", log_softmax_loops),
    ("float32-output", jacobian_float32),
    ("input-modified-in-place", jacobian_in_place),
]


CORRECT = {JACOBIAN: CORRECT_JACOBIAN}

WRONG = [(JACOBIAN, mid, fn) for mid, fn in WRONG_JACOBIAN]
