"""Corrections of surrogate HMC: keep or reject a proposal, asking the exact model only when needed.

A leapfrog move is deterministic, reversible and volume preserving for any fixed force field,
so the Metropolis test on the *exact* Hamiltonian ``H = U + K`` makes the draw a Markov
transition that leaves the posterior invariant, whatever the surrogate. A NUTS tree on the
surrogate is instead a *stochastic* move, reversible with respect to ``exp(-U~)``; delayed
acceptance (:class:`DelayedAcceptance`) turns it into one reversible with respect to the
posterior. The opt-in approximate test (the sparse-grid paper's "complete" variant) fills the
same slot with a target that uses the surrogate where it is defined, and says so
(``exact = False``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from pymc_rnshmc.hmc.acceptance import metropolis_accept
from pymc_rnshmc.hmc.proposals import Move

__all__ = [
    "ApproximateMetropolis",
    "SurrogateTarget",
    "DelayedAcceptance",
    "Correction",
    "Decision",
    "Evaluation",
    "ExactMetropolis",
]


class Evaluation(NamedTuple):
    """The target at one point: ``logp`` and, if computed, ``grad U = -grad logp``.

    ``exact`` is ``False`` when an approximate test took ``logp`` from the surrogate.
    """

    position: np.ndarray
    logp: float
    potential_gradient: np.ndarray | None = None
    exact: bool = True
    seconds: float = float("nan")
    """The evaluation's own compute time where it ran, where an evaluator measured it."""


class Decision(NamedTuple):
    """A correction's verdict on a move.

    ``end`` is the target at the move's end (``None`` if it was not evaluated); ``divergence``
    says why the move could not be judged (``None`` if it could).
    """

    accept: float
    accepted: bool
    energy_change: float
    end: Evaluation | None
    divergence: str | None


class Correction(Protocol):
    """Keeps or rejects a move; draws exactly one uniform from ``rng`` per move.

    ``on_surrogate``: its target is the surrogate's ``exp(-U~)`` everywhere (a target ``logp``
    cached under it is not the model's).
    """

    exact: bool
    on_surrogate: bool

    def target(
        self, position: np.ndarray, evaluate: Callable[[np.ndarray], Evaluation]
    ) -> Evaluation: ...

    def decide(
        self,
        start_logp: float,
        move: Move,
        evaluate: Callable[[np.ndarray], Evaluation],
        rng: np.random.Generator,
    ) -> Decision: ...


class ExactMetropolis:
    """Metropolis on the exact Hamiltonian: ``min(1, exp(-(H(end) - H(start))))``.

    Parameters
    ----------
    max_energy_change : float
        A larger (or non-finite) energy change is a divergence (PyMC's ``Emax``).
    """

    exact = True
    on_surrogate = False

    def __init__(self, max_energy_change: float) -> None:
        self.max_energy_change = float(max_energy_change)

    def target(
        self, position: np.ndarray, evaluate: Callable[[np.ndarray], Evaluation]
    ) -> Evaluation:
        """The target the test uses at ``position``: the exact model's, from ``evaluate``."""
        return evaluate(position)

    failure = (
        "The surrogate trajectory diverged: its gradient or position became non-finite, or its "
        "own energy changed by more than Emax."
    )
    """Why a failed move is rejected."""
    quantity = "Energy change"
    """What ``energy_change`` measures, for the divergence message."""

    def energy_change(self, start_logp: float, move: Move, end_logp: float) -> float:
        """``-log`` of the acceptance ratio: the exact Hamiltonian's change."""
        return (move.end_kinetic - end_logp) - (move.start_kinetic - start_logp)

    def decide(
        self,
        start_logp: float,
        move: Move,
        evaluate: Callable[[np.ndarray], Evaluation],
        rng: np.random.Generator,
    ) -> Decision:
        """Evaluate the target at the move's end (unless the move failed) and test.

        A move that is its own start is kept without an evaluation (the ratio is one).
        """
        divergence, end = None, None
        if move.stayed:
            accept, _ = metropolis_accept(0.0, rng)
            return Decision(accept, False, 0.0, None, None)
        if move.rejected_unevaluated:
            pass  # rejected, reversibly (hmc.force_field, hmc.generalized_leapfrog), no divergence
        elif move.failed:
            divergence = self.failure
        else:
            end = self.target(move.position, evaluate)
            if not np.isfinite(end.logp):
                divergence = f"The model's logp is {end.logp} at the proposal."
        energy_change = np.inf
        if end is not None and divergence is None:
            with np.errstate(over="ignore", invalid="ignore"):
                energy_change = self.energy_change(start_logp, move, end.logp)
            if not np.isfinite(energy_change) or abs(energy_change) > self.max_energy_change:
                divergence = (
                    f"{self.quantity} {energy_change:.3g} exceeds Emax = {self.max_energy_change}."
                )
        accept, accepted = metropolis_accept(energy_change, rng)
        return Decision(accept, accepted and divergence is None, energy_change, end, divergence)


class ApproximateMetropolis(ExactMetropolis):
    """Metropolis on ``U~ + K`` where ``U~`` is defined, on the exact ``H`` elsewhere.

    The chain then targets ``exp(-U~)`` inside the surrogate's domain, not the posterior.

    Parameters
    ----------
    surrogate_potential : callable
        ``q -> U~(q)``, NaN where the surrogate is not defined.
    max_energy_change : float
        As for :class:`ExactMetropolis`.
    """

    exact = False

    def __init__(
        self, surrogate_potential: Callable[[np.ndarray], float], max_energy_change: float
    ) -> None:
        super().__init__(max_energy_change)
        self.surrogate_potential = surrogate_potential

    def target(
        self, position: np.ndarray, evaluate: Callable[[np.ndarray], Evaluation]
    ) -> Evaluation:
        """``-U~`` where the surrogate is defined (no exact evaluation), else ``evaluate``."""
        value = float(self.surrogate_potential(position))
        if np.isfinite(value):
            return Evaluation(position, -value, exact=False)
        return evaluate(position)


class DelayedAcceptance(ExactMetropolis):
    r"""The second stage of delayed acceptance for a move reversible with respect to ``exp(-U~)``.

    A first-stage kernel :math:`\tilde K` reversible with respect to
    :math:`\tilde\pi = e^{-\tilde U}` (a NUTS transition on the surrogate) proposes
    :math:`y` from :math:`x`; accepting it with probability

    .. math:: \min\left(1, \frac{\pi(y)\,\tilde\pi(x)}{\pi(x)\,\tilde\pi(y)}\right)

    gives a kernel reversible with respect to the posterior :math:`\pi`, because
    :math:`\pi(x)\tilde K(x, y)\,\alpha(x, y) = \tilde K(x, y)\tilde\pi(x)
    \min(\pi(x)/\tilde\pi(x), \pi(y)/\tilde\pi(y))` and the right-hand side is
    symmetric in :math:`x, y` by the reversibility of :math:`\tilde K` [1]_ [2]_. The
    ratio needs the exact logp at :math:`y` only (the chain holds it at :math:`x`) and the
    surrogate potential at both, which the move carries from the tree; the constant offset of
    :math:`\tilde U` cancels. A move that stayed at :math:`x` is accepted without an exact
    evaluation (the ratio is one).

    Parameters
    ----------
    max_energy_change : float
        A larger (or non-finite) ``-log`` ratio is a divergence (PyMC's ``Emax``).

    References
    ----------
    .. [1] Christen, J. A., & Fox, C. (2005). Markov chain Monte Carlo using an approximation.
       Journal of Computational and Graphical Statistics, 14(4), 795-810.
    .. [2] Liu, J. S. (2001). Monte Carlo Strategies in Scientific Computing, section 5.5
       (surrogate transitions). Springer.
    """

    failure = "The surrogate's potential or gradient is not finite at the current point."
    quantity = "Surrogate error change"

    def energy_change(self, start_logp: float, move: Move, end_logp: float) -> float:
        """``-log`` of the second-stage ratio: the change of ``U - U~`` (the tree saw ``K``)."""
        return (-end_logp - move.end_potential) - (-start_logp - move.start_potential)


class SurrogateTarget:
    """A correction's test with the surrogate's ``exp(-U~)`` as its target: no exact evaluation.

    Tuning draws are discarded, so once the surrogate has stopped learning they may move on the
    surrogate alone: a leapfrog under :class:`ExactMetropolis` becomes Metropolis on
    ``U~ + K``, and a surrogate NUTS tree under :class:`DelayedAcceptance` is kept as it is
    (it is reversible with respect to ``exp(-U~)`` already). The chain then targets
    ``exp(-U~)``, not the posterior; kept draws never use this.

    Parameters
    ----------
    correction : ExactMetropolis
        The test of the surrogate draws (its ratio, divergence rule and messages).
    surrogate_potential : callable
        ``q -> U~(q)``; where it is not finite the move diverges and is rejected.
    """

    exact = False
    on_surrogate = True

    def __init__(
        self, correction: ExactMetropolis, surrogate_potential: Callable[[np.ndarray], float]
    ) -> None:
        self.correction = correction
        self.surrogate_potential = surrogate_potential

    def target(
        self, position: np.ndarray, evaluate: Callable[[np.ndarray], Evaluation]
    ) -> Evaluation:
        """``-U~`` at ``position`` (``evaluate`` is not called)."""
        return Evaluation(position, -float(self.surrogate_potential(position)), exact=False)

    def decide(
        self,
        start_logp: float,
        move: Move,
        evaluate: Callable[[np.ndarray], Evaluation],
        rng: np.random.Generator,
    ) -> Decision:
        """The wrapped correction's decision, with ``-U~`` for the target's ``logp``."""
        return self.correction.decide(
            start_logp, move, lambda position: self.target(position, evaluate), rng
        )
