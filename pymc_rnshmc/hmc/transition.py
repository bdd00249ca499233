"""One surrogate HMC transition: propose with the surrogate, correct with the target.

numpy only: the exact model, the surrogate and the random stream come in as callables and values,
so this is the whole numerical content of a draw, and the PyMC step around it keeps only the
bookkeeping (the cached point, step-size adaptation, statistics).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_rnshmc.hmc.corrections import Correction, Decision, Evaluation
from pymc_rnshmc.hmc.force_field import ForceField
from pymc_rnshmc.hmc.proposals import Move, Proposal

__all__ = [
    "CachedPoint",
    "DrawResult",
    "ProposedMove",
    "judge_move",
    "propose_move",
    "surrogate_potential_or_target",
    "surrogate_transition",
]


class CachedPoint(NamedTuple):
    """The chain's current point and what is already known there.

    Attributes
    ----------
    position : ndarray
        In the model's dtype, exactly as the chain holds it.
    logp : float
        Log density of the Metropolis test at ``position`` (the exact one, unless an opt-in
        approximate test is used).
    extras : tuple
        Whatever else the target depended on when ``logp`` was computed (PyMC: the values of
        the variables the step does not sample).
    surrogate_potential : float
        The trajectories' potential ``U~`` at ``position``; NaN while not known.
    force : ndarray or None
        The trajectories' force field at ``position``; ``None`` while not known.
    exact_force : bool
        ``force`` is the exact gradient (the surrogate's was not usable here).
    on_surrogate : bool
        ``logp`` is the surrogate's ``-U~`` (a correction ``on_surrogate``), not the model's.
    """

    position: np.ndarray
    logp: float
    extras: tuple
    surrogate_potential: float = np.nan
    force: np.ndarray | None = None
    exact_force: bool = False
    on_surrogate: bool = False

    def without_surrogate_values(self) -> CachedPoint:
        """The same point with the surrogate's values forgotten (after the surrogate changed).

        A ``logp`` that was the old surrogate's is forgotten too (NaN, still ``on_surrogate``).
        """
        logp = np.nan if self.on_surrogate else self.logp
        return CachedPoint(self.position, logp, self.extras, on_surrogate=self.on_surrogate)


class DrawResult(NamedTuple):
    """Everything one surrogate draw did; the step turns it into statistics.

    ``end`` is where the chain is after the draw; ``proposal`` is the target's evaluation at the
    proposal (``None`` if none was made), for surrogates that learn from it.
    """

    end: CachedPoint
    proposal: Evaluation | None
    accept: float
    accepted: bool
    energy: float
    energy_change: float
    n_steps: int
    step_size: float
    n_logp_evals: int
    n_gradient_evals: int
    exact_forces: int
    surrogate_error: float
    integrator_accept: float
    divergence: str | None
    approximate_test: bool = False
    left_trust_region: bool = False
    tree_depth: int = 0
    index_in_trajectory: int = 0
    reached_max_depth: bool = False
    solver_iterations: float = 0.0
    unconverged: bool = False
    irreversible: bool = False
    metric_range: tuple[float, float] | None = None


def surrogate_potential_or_target(
    surrogate_potential: Callable[[np.ndarray], float], position: np.ndarray, target_logp: float
) -> float:
    """``U~`` at ``position``, or ``-target_logp`` where the surrogate is not defined.

    The sparse-grid paper's eq. 3.11: a fixed function of the position either way.
    """
    return _or_target(float(surrogate_potential(position)), target_logp)


class ProposedMove(NamedTuple):
    """A surrogate move before its correction: the first half of a transition.

    ``position_to_evaluate`` is where the correction will ask for the target, or ``None`` when
    the move is rejected (or kept) without an evaluation: a driver of many chains can evaluate
    those positions together, then finish each move (:func:`judge_move`).
    """

    start: CachedPoint
    move: Move
    end_surrogate: float | None
    """``U~`` at the end, if the proposal half evaluated it already."""
    force_field: ForceField
    step_size: float

    @property
    def position_to_evaluate(self) -> np.ndarray | None:
        return self.move.position if _judged(self.move) else None


def surrogate_transition(
    start: CachedPoint,
    proposal: Proposal,
    correction: Correction,
    force_field: ForceField,
    step_size: float,
    rng: np.random.Generator,
    *,
    evaluate: Callable[[np.ndarray], Evaluation],
    surrogate_potential: Callable[[np.ndarray], float],
    cast: Callable[[np.ndarray], np.ndarray],
    extras: tuple,
    diagnose: bool,
    max_surrogate_energy_change: float = math.inf,
    evaluable: Callable[[np.ndarray], bool] | None = None,
) -> DrawResult:
    """Propose from a complete ``start`` with the surrogate's dynamics; correct with the target.

    Random numbers come from ``rng`` only: the proposal's, then one uniform of the correction.
    ``evaluate`` is the target at the proposal, ``cast`` puts a position in the dtype the chain
    holds, ``extras`` tags the new point's ``logp``. With ``diagnose`` the surrogate potential is
    also compared with the target (``surrogate_error``, the integrator's acceptance); otherwise
    those are NaN and 0. A finite ``max_surrogate_energy_change`` rejects a leapfrog trajectory
    whose own Hamiltonian ``U~ + K`` changed by more, without evaluating the target at its end
    (see :func:`_surrogate_diverged`); that costs one surrogate potential a draw. A proposal
    where ``evaluable`` is ``False`` is rejected without evaluating the target, as one that left
    the trust region (:mod:`~pymc_rnshmc.hmc.explored_region`, used while tuning only).

    The two halves, :func:`propose_move` and :func:`judge_move`, can run apart.
    """
    proposed = propose_move(
        start,
        proposal,
        force_field,
        step_size,
        rng,
        surrogate_potential=surrogate_potential,
        cast=cast,
        diagnose=diagnose,
        max_surrogate_energy_change=max_surrogate_energy_change,
        evaluable=evaluable,
    )
    return judge_move(
        proposed,
        correction,
        rng,
        evaluate=evaluate,
        surrogate_potential=surrogate_potential,
        extras=extras,
        diagnose=diagnose,
    )


def propose_move(
    start: CachedPoint,
    proposal: Proposal,
    force_field: ForceField,
    step_size: float,
    rng: np.random.Generator,
    *,
    surrogate_potential: Callable[[np.ndarray], float],
    cast: Callable[[np.ndarray], np.ndarray],
    diagnose: bool,
    max_surrogate_energy_change: float = math.inf,
    evaluable: Callable[[np.ndarray], bool] | None = None,
) -> ProposedMove:
    """The first half of :func:`surrogate_transition`: the move, with no target evaluation."""
    move = proposal.propose(
        start.position, start.force, force_field, step_size, rng, start.exact_force
    )
    move = _as_held(move, cast)
    if evaluable is not None and _judged(move) and not evaluable(move.position):
        move = move._replace(left_trust_region=True)
    end_surrogate = None  # U~ at the end: not evaluated unless needed
    if _is_plain_trajectory(move) and (diagnose or math.isfinite(max_surrogate_energy_change)):
        end_surrogate = float(surrogate_potential(move.position))
        if _surrogate_diverged(start, move, end_surrogate, max_surrogate_energy_change):
            move = move._replace(failed=True)
    return ProposedMove(start, move, end_surrogate, force_field, step_size)


def judge_move(
    proposed: ProposedMove,
    correction: Correction,
    rng: np.random.Generator,
    *,
    evaluate: Callable[[np.ndarray], Evaluation],
    surrogate_potential: Callable[[np.ndarray], float],
    extras: tuple,
    diagnose: bool,
) -> DrawResult:
    """The second half of :func:`surrogate_transition`: the correction, and the draw's result.

    ``rng`` continues the stream of the first half (the correction draws one uniform).
    """
    start, move, end_surrogate = proposed.start, proposed.move, proposed.end_surrogate
    step_size, force_field = proposed.step_size, proposed.force_field
    decision = correction.decide(start.logp, move, evaluate, rng)
    limit = getattr(correction, "max_energy_change", math.inf)
    if _only_the_surrogate_erred(start, move, decision, surrogate_potential, end_surrogate, limit):
        decision = decision._replace(divergence=None)
    end = decision.end
    end_surrogate, integrator_accept, surrogate_error = _agreement(
        start, move, decision, surrogate_potential, end_surrogate, diagnose
    )
    if decision.accepted:
        point = CachedPoint(
            move.position.copy(),
            end.logp,
            extras,
            end_surrogate,
            move.force,
            move.end_exact,
            correction.on_surrogate,
        )
        energy = move.end_kinetic - end.logp
    else:
        point = start._replace(extras=extras)
        energy = move.start_kinetic - start.logp
    exact_end = end is not None and end.exact
    exact_forces = force_field.exact_points
    return DrawResult(
        end=point,
        proposal=end,
        accept=decision.accept,
        accepted=decision.accepted,
        energy=energy,
        energy_change=decision.energy_change,
        n_steps=move.n_steps,
        step_size=step_size,
        n_logp_evals=int(exact_end) + exact_forces,
        n_gradient_evals=int(exact_end and end.potential_gradient is not None) + exact_forces,
        exact_forces=exact_forces,
        surrogate_error=surrogate_error,
        integrator_accept=integrator_accept,
        divergence=decision.divergence or _tree_divergence(move),
        approximate_test=end is not None and not end.exact,
        left_trust_region=move.left_trust_region,
        tree_depth=move.tree_depth,
        index_in_trajectory=move.index_in_trajectory if decision.accepted else 0,
        reached_max_depth=move.reached_max_depth,
        solver_iterations=move.solver_iterations,
        unconverged=move.unconverged,
        irreversible=move.irreversible,
        metric_range=move.metric_range,
    )


def _as_held(move: Move, cast: Callable[[np.ndarray], np.ndarray]) -> Move:
    """The move with its end point as the chain will hold it (the model's dtype).

    The proposal is judged and cached there: a float32 model otherwise missed its cache at the
    next draw. Where the cast moved the point, the force the trajectory computed belongs to the
    uncast point, so it is dropped (the next draw computes it at the held point): otherwise the
    next trajectory's first half-step would depend on this trajectory at rounding level, and the
    kernel would not be a fixed function of the chain's state.
    """
    held = cast(move.position)
    if move.force is not None and not np.array_equal(held, move.position):
        return move._replace(position=held, force=None, end_exact=False)
    return move._replace(position=held)


def _only_the_surrogate_erred(
    start: CachedPoint,
    move: Move,
    decision: Decision,
    surrogate_potential: Callable[[np.ndarray], float],
    end_surrogate: float | None,
    limit: float,
) -> bool:
    """Whether a move rejected for a finite energy change beyond ``limit`` is no divergence.

    Its dynamics kept the surrogate's own Hamiltonian (a NUTS tree reports its own
    divergences; a leapfrog's ``U~ + K`` changed by less than the same limit): the surrogate
    was that much too low at the end, where the posterior has next to no mass. That is a
    rejection, like any other, not a failure of the integration that PyMC's divergences warn
    of. A change below ``-limit``, a wall of that height, stays a divergence. (The ceiling of
    :mod:`~pymc_rnshmc.surrogates.ceiling` lets trajectories go where a light tail rises
    steeply: 32 and 410 of 20,000 draws of a log-gamma posterior were such rejections.)
    """
    change = decision.energy_change
    if decision.divergence is None or decision.end is None or not math.isfinite(change):
        return False
    if not change > limit:  # a wall (the end far likelier than the surrogate said), or else
        return False
    if math.isfinite(move.surrogate_accept):  # a tree: its own divergences are its own
        return True
    if not _is_plain_trajectory(move):
        return False
    with np.errstate(all="ignore"):
        start_surrogate = start.surrogate_potential  # cached, unless a draw left it unknown
        if not math.isfinite(start_surrogate):
            start_surrogate = float(surrogate_potential(start.position))
        if end_surrogate is None:
            end_surrogate = float(surrogate_potential(move.position))
        change = end_surrogate + move.end_kinetic - start_surrogate - move.start_kinetic
    return bool(abs(change) <= limit)


def _judged(move: Move) -> bool:
    """A move whose end the correction would evaluate (not failed, rejected or stayed)."""
    return not (move.failed or move.rejected_unevaluated or move.stayed)


def _is_plain_trajectory(move: Move) -> bool:
    """A leapfrog trajectory that ended normally (not a tree, not already rejected)."""
    return not (
        move.failed
        or move.rejected_unevaluated
        or move.stayed
        or np.isfinite(move.surrogate_accept)
    )


def _surrogate_diverged(start: CachedPoint, move: Move, end_surrogate: float, limit: float) -> bool:
    """Whether the trajectory's own Hamiltonian ``U~ + K`` changed by more than ``limit``.

    Such a trajectory has flown off: on the pharmacokinetic ODE without gradients, a values-only
    surrogate sent one to ``log sigma = 95``, where a single exact solve ran for minutes.
    Rejecting it without evaluating the model is a symmetric rule (the reversed trajectory's
    change is the negative), so the kernel stays reversible. Not applied where the surrogate
    potential is not defined (outside a grid's box) or not known at the start.
    """
    start_surrogate = start.surrogate_potential
    if not (math.isfinite(start_surrogate) and math.isfinite(end_surrogate)):
        return False
    change = end_surrogate + move.end_kinetic - start_surrogate - move.start_kinetic
    return not abs(change) <= limit


def _agreement(
    start: CachedPoint,
    move: Move,
    decision: Decision,
    surrogate_potential: Callable[[np.ndarray], float],
    end_surrogate: float | None,
    diagnose: bool,
) -> tuple[float, float, float]:
    """How the surrogate saw the move.

    ``end_surrogate`` is ``U~`` at the end if it was evaluated already (``None``: not yet).
    Returns the surrogate potential at the end (the target's where ``U~`` is not defined; NaN
    if not evaluated), the integrator's acceptance on the surrogate's own Hamiltonian, and how
    much the surrogate misjudged the potential change.
    """
    if move.failed or move.rejected_unevaluated:
        return np.nan, 0.0, np.nan
    if np.isfinite(move.surrogate_accept):
        return _tree_agreement(start, move, decision)
    if not diagnose:
        if end_surrogate is None or decision.end is None:
            return np.nan, np.nan, np.nan
        return _or_target(end_surrogate, decision.end.logp), np.nan, np.nan
    end_logp = decision.end.logp
    start_surrogate = start.surrogate_potential
    if np.isnan(start_surrogate):  # left unknown by a draw without the diagnostic
        start_surrogate = surrogate_potential_or_target(
            surrogate_potential, start.position, start.logp
        )
    integrator_accept, surrogate_error = 0.0, np.nan
    with np.errstate(over="ignore", invalid="ignore"):
        if end_surrogate is None:
            end_surrogate = float(surrogate_potential(move.position))
        end_surrogate = _or_target(end_surrogate, end_logp)
        start_energy = move.start_kinetic - start.logp
        surrogate_change = (
            end_surrogate - start_surrogate + move.end_kinetic - (start_energy + start.logp)
        )
    if np.isfinite(surrogate_change):
        integrator_accept = float(np.exp(min(0.0, -surrogate_change)))
    if decision.divergence is None:
        surrogate_error = (start.logp - end_logp) - (end_surrogate - start_surrogate)
    return end_surrogate, integrator_accept, surrogate_error


def _or_target(surrogate_potential: float, target_logp: float) -> float:
    """``U~``, or ``-target_logp`` where the surrogate is not defined.

    :func:`surrogate_potential_or_target` for a value already evaluated.
    """
    return surrogate_potential if np.isfinite(surrogate_potential) else -float(target_logp)


def _tree_divergence(move: Move) -> str | None:
    """Why a NUTS tree on the surrogate stopped early, if it diverged (its draw still counts)."""
    if not move.tree_divergent:
        return None
    return (
        "The NUTS tree on the surrogate diverged (its energies spread too far or became "
        "non-finite): the step size is too large for the surrogate there."
    )


def _tree_agreement(
    start: CachedPoint, move: Move, decision: Decision
) -> tuple[float, float, float]:
    """:func:`_agreement` for a proposal that weighed its own states (a NUTS tree).

    Free: the move carries ``U~`` at both ends and the tree's mean acceptance.
    """
    surrogate_error = np.nan
    if decision.end is not None and decision.divergence is None:
        exact_change = start.logp - decision.end.logp
        surrogate_error = exact_change - (move.end_potential - move.start_potential)
    return move.end_potential, move.surrogate_accept, surrogate_error
