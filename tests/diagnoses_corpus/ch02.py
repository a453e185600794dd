"""Chapter 02 bugs as learners make them."""

from __future__ import annotations

import numpy as np

JAC = "02.softmax_jacobian"


def jac_minus_sign(p):
    """Writes the two terms the other way round, with loops."""
    n = p.size
    J = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            J[i, j] = p[i] * p[j] - (p[i] if i == j else 0.0)
    return J


def jac_doubled(p):
    """Copies a factor 2 from a squared-error derivative."""
    return 2.0 * (np.diag(p) - np.outer(p, p))


def jac_halved(p):
    """Averages the Jacobian with its transpose and divides once more."""
    J = np.diag(p) - np.outer(p, p)
    return (J + J.T) / 4.0


def jac_diagonal_double_counted(p):
    """Puts p(1-p) on the diagonal and then subtracts the outer product everywhere."""
    return np.diag(p - p**2) - np.outer(p, p)


def jac_outer_one_minus(p):
    """p_i (1 - p_j) for every pair."""
    return np.outer(p, 1.0 - p)


def jac_finite_differences(p):
    """Numerical derivative of softmax at log p with a forward difference."""
    x = np.log(np.clip(p, 1e-300, None))
    h = 1e-5

    def sm(z):
        e = np.exp(z - z.max())
        return e / e.sum()

    base = sm(x)
    cols = []
    for j in range(p.size):
        dx = x.copy()
        dx[j] += h
        cols.append((sm(dx) - base) / h)
    return np.stack(cols, axis=1)


def jac_outer_with_sum(p):
    """Subtracts p_i times the sum of p (always 1) instead of p_i p_j."""
    return np.diag(p) - p[:, None] * p.sum()


def jac_einsum_negated(p):
    """einsum version with the sign of the whole expression flipped."""
    return np.einsum("i,j->ij", p, p) - np.einsum("i,ij->ij", p, np.eye(p.size))


BUGS = [(JAC, f) for f in (jac_minus_sign, jac_doubled, jac_halved, jac_diagonal_double_counted,
                           jac_outer_one_minus, jac_finite_differences, jac_outer_with_sum,
                           jac_einsum_negated)]
