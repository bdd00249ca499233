"""A NUTS transition on a surrogate Hamiltonian, reversible with respect to ``exp(-U~)``.

The No-U-Turn Sampler builds a trajectory by repeated doubling in a random direction until a
U-turn, then draws a state from it in proportion to ``exp(-H~)``, with ``H~ = U~(q) + K(p)``
and ``U~`` the surrogate potential. Every step calls only the surrogate (potential and gradient
together), so a tree costs no exact evaluation; the delayed-acceptance test of
:class:`~pymc_rnshmc.hmc.corrections.DelayedAcceptance` then corrects the draw with one exact
logp.

Delayed acceptance needs the first stage to be *reversible* with respect to ``exp(-U~)``, not
just to leave it invariant. Two properties give it:

* **The trajectory does not depend on where in it the chain started.** Every check that can
  stop the doubling (the generalized no-U-turn criterion with Stan's extra checks across merged
  subtrees, the divergence check, the depth limit) is a function of an aligned subtree of the
  final trajectory, so from any of its states the same trajectory is built with the same
  probability. For this a **divergence** here is an aligned subtree (or the union of the tree
  and a new subtree) whose energies spread by more than ``max_energy_spread`` or are not
  finite: a property of the set of states, where Stan compares each state with the *initial*
  energy, which depends on the starting state.
* **The state drawn from it is reversible on the trajectory.** Within a new subtree the draw is
  multinomial (in proportion to ``w = exp(-H~)``); when a subtree joins the tree, the sample
  moves into it with probability ``min(1, W_new / W_old)`` (Stan's biased progressive
  sampling, ``W`` the subtrees' summed weights). If ``x`` and ``y`` first share a subtree when
  ``y``'s half ``N`` joins ``x``'s half ``T``, then ``w_x P(x -> y) = w_x w_y min(1/W_N,
  1/W_T) R``, with ``R`` the probability that no later subtree takes the sample, and the same
  expression with ``x`` and ``y`` exchanged: detailed balance on the trajectory, with a
  preference for far states that a multinomial draw over the whole trajectory lacks.

With the momentum refreshed from a symmetric distribution and flipped at the end, the kernel on
``q`` is then reversible with respect to ``exp(-U~)`` [1]_ [2]_ [3]_.

Written by hand: PyMC's NUTS evaluates the model's exact logp and gradient at every step
(through its compiled ``CpuLeapfrogIntegrator``) and samples biased-progressively; BlackJAX's
needs JAX. This tree calls one Python function per step, the surrogate's fused potential and
gradient.

References
----------
.. [1] Hoffman, M. D., & Gelman, A. (2014). The No-U-Turn sampler. JMLR, 15, 1593-1623.
.. [2] Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo.
   arXiv:1701.02434, appendix A.
.. [3] Durmus, A., Gruffaz, S., Kailas, M., Saksman, E., & Vihola, M. (2023). On the
   convergence of dynamic implementations of Hamiltonian Monte Carlo and No U-Turn Samplers.
   arXiv:2307.03460.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.hmc.metrics import Metric

__all__ = ["MAX_ENERGY_SPREAD", "TreeResult", "TreeState", "finite_state", "surrogate_nuts"]

MAX_ENERGY_SPREAD = 1000.0
"""A subtree whose surrogate energies spread by more than this is divergent (PyMC's ``Emax``)."""


class TreeState(NamedTuple):
    """One point of a trajectory: position, momentum, ``U~`` and ``grad U~`` there."""

    position: np.ndarray
    momentum: np.ndarray
    potential: float
    gradient: np.ndarray


class TreeResult(NamedTuple):
    """What one NUTS transition on the surrogate did.

    Attributes
    ----------
    sample : TreeState
        The state drawn from the trajectory (the start itself when ``index == 0``).
    start_kinetic : float
        Kinetic energy of the momentum drawn at the start.
    depth : int
        Doublings completed.
    n_steps : int
        Leapfrog steps taken (surrogate evaluations).
    mean_accept : float
        Mean of ``min(1, exp(H~_0 - H~))`` over the steps: the first stage's acceptance
        statistic, which the step size adapts on.
    divergent : bool
        The doubling stopped on a divergence.
    reached_max_depth : bool
        The doubling ran to ``max_depth`` without a U-turn or a divergence.
    index : int
        Position of the sample relative to the start, in steps (negative: backwards in time).
    """

    sample: TreeState
    start_kinetic: float
    depth: int
    n_steps: int
    mean_accept: float
    divergent: bool
    reached_max_depth: bool
    index: int


class _Tree(NamedTuple):
    """An aligned subtree in time order, with what merging and the checks need.

    ``left_index`` and ``right_index`` count steps from the transition's start (negative:
    backwards in time); ``sample`` is the state drawn from the subtree so far.
    """

    left: TreeState
    right: TreeState
    left_velocity: np.ndarray
    right_velocity: np.ndarray
    momentum_sum: np.ndarray
    log_weight: float
    sample: TreeState
    sample_index: int
    left_index: int
    right_index: int
    lowest_energy: float
    highest_energy: float


class _Merged(NamedTuple):
    """The union of two adjacent subtrees, and the checks' verdicts on it.

    ``tree`` is ``None`` if its energies spread too far (``divergent``); ``turned`` is the
    no-U-turn criterion's verdict on the union.
    """

    tree: _Tree | None
    divergent: bool
    turned: bool


class _Built(NamedTuple):
    """A subtree built in one direction: ``tree`` is ``None`` if it U-turned or diverged."""

    tree: _Tree | None
    n_steps: int
    accept_sum: float
    divergent: bool


def finite_state(potential: float, gradient: np.ndarray) -> bool:
    """Whether ``U~`` and its gradient are finite: the test every state of a tree must pass.

    A sum is finite only if every term is (one reduction instead of an array of flags).
    """
    return math.isfinite(potential) and math.isfinite(float(gradient.sum()))


def _no_turn(left_velocity, right_velocity, momentum_sum) -> bool:
    return left_velocity.dot(momentum_sum) > 0 and right_velocity.dot(momentum_sum) > 0


def _log_add_exp(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` of two floats (``math``: numpy's costs a microsecond)."""
    high, low = (a, b) if a >= b else (b, a)
    return high + math.log1p(math.exp(low - high))


def _turned(merged: _Tree, earlier: _Tree, later: _Tree) -> bool:
    """The generalized no-U-turn criterion on ``merged``, and across its two halves (Stan's)."""
    if not _no_turn(merged.left_velocity, merged.right_velocity, merged.momentum_sum):
        return True
    across_left = earlier.momentum_sum + later.left.momentum
    if not _no_turn(earlier.left_velocity, later.left_velocity, across_left):
        return True
    across_right = later.momentum_sum + earlier.right.momentum
    return not _no_turn(earlier.right_velocity, later.right_velocity, across_right)


class _Builder:
    """Builds and merges subtrees for one transition; holds only the transition's constants."""

    def __init__(self, potential_and_gradient, metric, step_size, start_energy, spread, rng):
        self.potential_and_gradient = potential_and_gradient
        self.metric = metric
        self.step_size = step_size
        self.start_energy = start_energy
        self.spread = spread
        self.rng = rng

    def leaf(self, state: TreeState, direction: int, index: int) -> _Built:
        """One leapfrog step from ``state`` (at step ``index - direction``)."""
        step = direction * self.step_size
        momentum = state.momentum - 0.5 * step * state.gradient
        position = state.position + step * self.metric.velocity(momentum)
        potential, gradient = self.potential_and_gradient(position)
        momentum = momentum - 0.5 * step * gradient
        velocity = self.metric.velocity(momentum)
        potential = float(potential)
        energy = potential + 0.5 * float(momentum.dot(velocity))
        if not (math.isfinite(energy) and finite_state(potential, gradient)):
            return _Built(None, 1, 0.0, True)
        point = TreeState(position, momentum, potential, gradient)
        accept = math.exp(min(0.0, self.start_energy - energy))
        tree = _Tree(
            point, point, velocity, velocity, momentum, -energy, point, index, index, index,
            energy, energy,
        )  # fmt: skip
        return _Built(tree, 1, accept, False)

    def build(self, state: TreeState, depth: int, direction: int, index: int) -> _Built:
        """The subtree of ``2**depth`` steps from ``state`` (at step ``index``) in ``direction``."""
        if depth == 0:
            return self.leaf(state, direction, index + direction)
        first = self.build(state, depth - 1, direction, index)
        if first.tree is None:
            return first
        edge, edge_index = _edge(first.tree, direction)
        second = self.build(edge, depth - 1, direction, edge_index)
        n_steps = first.n_steps + second.n_steps
        accept_sum = first.accept_sum + second.accept_sum
        if second.tree is None:
            return _Built(None, n_steps, accept_sum, second.divergent)
        merged = self.merge(first.tree, second.tree, direction, biased=False)
        tree = None if merged.turned else merged.tree  # a subtree that U-turns is dropped
        return _Built(tree, n_steps, accept_sum, merged.divergent)

    def merge(self, old: _Tree, new: _Tree, direction: int, biased: bool) -> _Merged:
        """The union of adjacent subtrees (``new`` beyond ``old`` in ``direction``).

        The sample is ``new``'s with probability ``W_new / (W_old + W_new)`` (a multinomial
        draw over the union), or ``min(1, W_new / W_old)`` if ``biased`` (the top level).
        """
        lowest = min(old.lowest_energy, new.lowest_energy)
        highest = max(old.highest_energy, new.highest_energy)
        if highest - lowest > self.spread:
            return _Merged(None, True, False)
        earlier, later = _in_time_order(old, new, direction)
        log_weight = _log_add_exp(old.log_weight, new.log_weight)
        odds = new.log_weight - (old.log_weight if biased else log_weight)
        chosen = new if self.rng.random() < math.exp(min(odds, 0.0)) else old
        merged = _Tree(
            earlier.left,
            later.right,
            earlier.left_velocity,
            later.right_velocity,
            earlier.momentum_sum + later.momentum_sum,
            log_weight,
            chosen.sample,
            chosen.sample_index,
            earlier.left_index,
            later.right_index,
            lowest,
            highest,
        )
        return _Merged(merged, False, _turned(merged, earlier, later))


def _in_time_order(old: _Tree, new: _Tree, direction: int) -> tuple[_Tree, _Tree]:
    return (old, new) if direction > 0 else (new, old)


def _edge(tree: _Tree, direction: int) -> tuple[TreeState, int]:
    """The state a subtree in ``direction`` continues from, and its index."""
    if direction > 0:
        return tree.right, tree.right_index
    return tree.left, tree.left_index


def surrogate_nuts(
    position: np.ndarray,
    potential: float,
    gradient: np.ndarray,
    potential_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    metric: Metric,
    step_size: float,
    rng: np.random.Generator,
    max_depth: int = 10,
    max_energy_spread: float = MAX_ENERGY_SPREAD,
) -> TreeResult:
    """One NUTS transition on ``H~ = U~(q) + K(p)`` from ``position``.

    Parameters
    ----------
    position : ndarray, shape (d,)
    potential, gradient
        ``U~`` and ``grad U~`` at ``position``.
    potential_and_gradient : callable
        ``q -> (U~(q), grad U~(q))``.
    metric : Metric
        Kinetic energy of the trajectories.
    step_size : float
    rng : numpy.random.Generator
        Draws the momentum, then per doubling its direction and the multinomial choices.
    max_depth : int
        Largest number of doublings (``2**max_depth`` steps at most).
    max_energy_spread : float
        Energies of a subtree spreading by more than this are a divergence.
    """
    momentum = metric.random(rng)
    velocity = metric.velocity(momentum)
    start_kinetic = 0.5 * float(momentum @ velocity)
    start = TreeState(position, momentum, float(potential), gradient)
    start_energy = float(potential) + start_kinetic
    builder = _Builder(
        potential_and_gradient, metric, step_size, start_energy, max_energy_spread, rng
    )
    tree = _Tree(
        start, start, velocity, velocity, momentum, -start_energy, start, 0, 0, 0,
        start_energy, start_energy,
    )  # fmt: skip
    n_steps, accept_sum, divergent, reached_max_depth = 0, 0.0, False, False
    for depth in range(1, max_depth + 1):
        direction = 1 if rng.random() < 0.5 else -1
        edge, edge_index = _edge(tree, direction)
        built = builder.build(edge, depth - 1, direction, edge_index)
        n_steps, accept_sum = n_steps + built.n_steps, accept_sum + built.accept_sum
        if built.tree is None:
            divergent = built.divergent
            break
        merged = builder.merge(tree, built.tree, direction, biased=True)
        divergent = merged.divergent
        if merged.tree is None:
            break
        tree = merged.tree  # a U-turn of the whole tree keeps it, and ends the doubling
        if merged.turned:
            break
    else:
        depth, reached_max_depth = max_depth, True
    return TreeResult(
        tree.sample,
        start_kinetic,
        depth,
        n_steps,
        accept_sum / max(n_steps, 1),
        divergent,
        reached_max_depth,
        tree.sample_index,
    )
