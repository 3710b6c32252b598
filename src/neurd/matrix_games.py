"""Matrix games of the paper: repeated matching pennies (Figs 1-2) and biased RPS (Figs 3-5).

The "even" player's utility vector for one round of matching pennies, given
the "odd" player's action, over the actions (H, T) or (H, T, Forfeit).  The
paper states rewards of +1 (match) and -1 (mismatch); Forfeit always loses.
``win`` and ``loss`` are parameters because the paper's own numbers (Fig 2's
step size, footnote 2's regret bound) are reproduced with win = 1, loss = 0,
which is the same game up to an affine change of rewards (see the README).
"""

from __future__ import annotations

import numpy as np

HEADS, TAILS, FORFEIT = 0, 1, 2
ACTION_NAMES = ("H", "T", "F")


def matching_pennies_utilities(odd_plays_heads, forfeit: bool, win: float = 1.0,
                               loss: float = -1.0):
    """Utilities of the even player, ``[...] (bool) -> [..., 2 or 3]`` (JAX arrays).

    H wins when odd plays H, T wins when odd plays T, F always loses.
    """
    import jax.numpy as jnp

    heads = jnp.where(odd_plays_heads, win, loss)
    tails = jnp.where(odd_plays_heads, loss, win)
    columns = [heads, tails]
    if forfeit:
        columns.append(jnp.full_like(heads, loss))
    return jnp.stack(columns, axis=-1)


# --- Rock-Paper-Scissors with bias nu (Figs 3-5) -------------------------------
#
# The biased RPS of the paper's table (eq:biased-rps), payoffs of the first
# player, rows and columns R, P, S:
#
#         R     P     S
#    R    0    -1    nu
#    P    1     0    -1
#    S  -nu     1     0
#
# The matrix is antisymmetric (M^T = -M), so the game is symmetric and
# zero-sum with value 0: one population playing ``pi`` against itself is the
# two-player game with both players using ``pi``.

RPS_ACTIONS = ("R", "P", "S")


def biased_rps(nu: float) -> np.ndarray:
    """First player's payoffs of biased RPS (table eq:biased-rps), ``[3, 3]``.

    ``nu = 1`` is standard RPS.  Any finite ``nu`` gives a valid game; the
    paper uses 0, 1, 3 and 20.
    """
    nu = float(nu)
    if not np.isfinite(nu):
        raise ValueError(f"biased RPS needs a finite nu, got {nu!r}")
    return np.array([[0.0, -1.0, nu], [1.0, 0.0, -1.0], [-nu, 1.0, 0.0]])


def biased_rps_nash(nu: float) -> np.ndarray:
    """Closed-form symmetric Nash policy ``(1, nu, 1) / (nu + 2)``, ``[3]``.

    It spans the null space of the payoff matrix, so every action earns 0
    against it.  For ``nu > 0`` it is the unique equilibrium (interior); for
    ``nu = 0`` it is one end of a segment of equilibria on the R-S edge (see
    :func:`symmetric_equilibrium_bounds`); for ``nu < 0`` it is not a policy.
    """
    nu = float(nu)
    if not nu >= 0.0:
        raise ValueError(f"the closed-form Nash (1, nu, 1)/(nu + 2) needs nu >= 0, got {nu!r}")
    return np.array([1.0, nu, 1.0]) / (nu + 2.0)


def check_symmetric_zero_sum(payoff) -> np.ndarray:
    """``payoff`` as a float array, or a ValueError if it is not antisymmetric ``[A, A]``."""
    payoff = np.asarray(payoff, dtype=np.float64)
    if payoff.ndim != 2 or payoff.shape[0] != payoff.shape[1]:
        raise ValueError(f"payoff matrix must be square, got shape {payoff.shape}")
    if not np.allclose(payoff, -payoff.T, rtol=0.0, atol=1e-12):
        raise ValueError(f"payoff matrix is not antisymmetric (symmetric zero-sum):\n{payoff}")
    return payoff


def symmetric_nash_conv(payoff, pi):
    """NashConv (eq. nashconv) of one population ``pi`` in a symmetric zero-sum game.

    Both players play ``pi``; each gains ``max_a (M pi)_a - pi.M pi`` by
    deviating, and ``pi.M pi = 0`` for antisymmetric ``M``, so
    ``NashConv(pi) = 2 max_a (M pi)_a``.  Works on numpy and JAX arrays.

    Shapes: ``payoff`` ``[..., A, A]``, ``pi`` ``[..., A]`` -> ``[...]``.
    """
    values = (payoff @ pi[..., None])[..., 0]
    return 2.0 * values.max(axis=-1)


def bimatrix_nash_conv(row_payoff, col_payoff, x, y):
    """NashConv (eq. nashconv) of the profile ``(x, y)`` in a bimatrix game.

    ``row_payoff[i, j]`` / ``col_payoff[i, j]``: payoffs of the row / column
    player when they play ``i`` / ``j``.  Sum over players of best-response
    value minus current value:
    ``max(A y) - x.A y + max(x.B) - x.B y``.

    Shapes: payoffs ``[..., I, J]``, ``x`` ``[..., I]``, ``y`` ``[..., J]`` -> ``[...]``.
    """
    row_values = (row_payoff @ y[..., None])[..., 0]          # [..., I]
    col_values = (x[..., None, :] @ col_payoff)[..., 0, :]    # [..., J]
    row_current = (x * row_values).sum(axis=-1)
    col_current = (col_values * y).sum(axis=-1)
    return row_values.max(axis=-1) - row_current + col_values.max(axis=-1) - col_current


def symmetric_equilibrium_bounds(payoff) -> tuple[np.ndarray, np.ndarray]:
    """Range of each action's probability over all symmetric Nash policies.

    In a symmetric zero-sum game (value 0) ``pi`` is an equilibrium iff
    ``M pi <= 0`` componentwise: no action earns more than the value against
    it.  That set is a polytope; two linear programs per action give the
    smallest and largest probability it can have there.  The equilibrium is
    unique iff ``lower == upper`` (to solver tolerance).

    Shapes: ``payoff`` ``[A, A]`` -> ``(lower [A], upper [A])``.
    """
    from scipy.optimize import linprog  # scipy: most steps never solve a linear program

    payoff = check_symmetric_zero_sum(payoff)
    n = payoff.shape[0]
    lower, upper = np.empty(n), np.empty(n)
    for a in range(n):
        for sign, out in ((1.0, lower), (-1.0, upper)):
            result = linprog(
                sign * np.eye(n)[a], A_ub=payoff, b_ub=np.zeros(n),
                A_eq=np.ones((1, n)), b_eq=[1.0], bounds=[(0.0, 1.0)] * n, method="highs",
            )
            if not result.success:
                raise RuntimeError(f"equilibrium LP failed for action {a}: {result.message}")
            out[a] = sign * result.fun
    return lower, upper
