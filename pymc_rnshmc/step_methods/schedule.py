"""A surrogate HMC chain's phases, and the schedule that moves it from exploring to sampling.

The policy that Stan keeps in its services layer. ``pm.sample`` offers a step only ``tune``,
``stop_tuning()`` and, on PyMC 6, ``setup_chain(rng, tune, draws)``, so the policy lives with the
step, as plain data: one :class:`ExplorationSchedule` per sampler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = [
    "ARNSHMC_SCHEDULE",
    "RNSHMC_SCHEDULE",
    "SPARSE_GRID_SCHEDULE",
    "ExplorationSchedule",
    "Phase",
]


ASSUMED_TUNE = 1000
"""``pm.sample``'s default ``tune``: the tuning length assumed where the step is not told it."""

EARLIEST_SHARE = 0.2
"""RNSHMC's first fit waits for at least this share of tuning. Measured with
``python -m benchmarks.start_rules`` (PyMC 6.4, 4 seeds, 1000 + 1000 draws): on the posteriors
the rules were set on (posteriordb's kilpisjarvi, garch, arK and non-centred eight schools, and
a banana), starting after ``max(50, 1.5 d)`` draws met the bar (bulk and tail ESS per draw at
least 0.7 of a 700-draw exploration's, medians over seeds) on two of five, starting after 20 %
of tuning on three of five, for 0.84 to 1.38 times the exact evaluations (still about half of
the long exploration's). ``docs/reliability.md`` has the held-out posteriors."""

VALUES_ONLY_SHORTEST = 200
"""Without gradients, the exploration takes at least this many random-walk draws ..."""
VALUES_ONLY_PER_DIMENSION = 25.0
"""... and this many per dimension ..."""
VALUES_ONLY_POINTS_PER_DIMENSION = 10
"""... and the first fit needs this many points per dimension."""
VALUES_ONLY_REFIT_GROWTH = 1.5
"""Without gradients, refit each time the record has grown by this factor."""


class Phase(StrEnum):
    """What a surrogate HMC chain is doing (compares equal to its value, e.g. ``"surrogate"``)."""

    EXPLORATION = "exploration"
    """Exact NUTS, recording draws for the first fit."""
    SURROGATE = "surrogate"
    """Surrogate dynamics with the exact Metropolis test."""
    EXACT = "exact"
    """Exact NUTS for good: no usable surrogate."""


@dataclass(frozen=True)
class ExplorationSchedule:
    """How long the exact exploration runs before the first fit, and what the fit uses.

    Attributes
    ----------
    tuning_share : float
        Exploration length as a share of ``tune`` (PyMC 6 tells the step ``tune``). With
        ``early``, the latest start instead.
    without_tuning_length : int
        Exploration length on PyMC 5, which does not tell the step ``tune``.
    shortest : int
        At least this many exploration draws (at most ``tune``).
    per_dimension : float
        ... and, with ``early``, at least this many per dimension.
    early : bool
        Start after ``max(shortest, per_dimension * d, earliest_share * tune)`` draws and
        postpone (by ``postpone_factor``) while the fit is poor, up to the latest start.
    earliest_share : float
        With ``early``: the share of tuning the first fit waits for at least (of
        ``ASSUMED_TUNE`` on PyMC 5, which does not tell the step ``tune``).
    postpone_factor : float
        A postponed start waits until this many times the draws explored so far.
    postponements_without_tuning_length : int
        On PyMC 5, the latest start is the first one postponed this many times.
    points_per_dimension, points_constant : int
        The first fit needs ``points_per_dimension * d + points_constant`` training draws.
    training_share : float
        Share of the last exploration draws trained on (the first ones may still be burning in).
    learns_during_tuning : bool
        Once the surrogate dynamics run, tuning draws evaluate the exact gradient at each
        proposal, record the plausible ones, and refit the surrogate (re-choosing the dynamics)
        whenever the record has grown by ``refit_growth``; the surrogate is frozen when tuning
        ends. Learning stops earlier once a refit's held-out gradient error is below
        ``negligible_error``, or below ``learned_error`` without improving on the previous fit's
        by ``refit_improvement``, or when no refit could be followed by ``refit_adaptation``
        tuning draws.
    refit_growth : float
        Refit each time the training points have grown by this factor since the last fit.
    first_refit_growth : float
        The first refit, which is always wanted, may come on fewer points: where the record
        cannot reach ``refit_growth`` times the first fit's in time, it comes at the last draw
        that leaves ``refit_adaptation`` tuning draws after it, if the record has grown by this
        factor by then (:meth:`least_refit`).
    negligible_error : float
        A held-out relative gradient error that leaves nothing to learn.
    learned_error : float
        A held-out relative gradient error small enough to stop learning once it stagnates.
    refit_improvement : float
        A refit improves if its held-out gradient error is below this share of the previous
        fit's.
    refit_adaptation : int
        Tuning draws needed after a refit to re-adapt the step size (PyMC 6, which tells the
        step the tuning length).
    simulated_draws : int
        Length of each simulated chain when the trajectory settings are chosen.
    """

    tuning_share: float = 0.7
    without_tuning_length: int = 700
    shortest: int = 1
    per_dimension: float = 0.0
    early: bool = False
    earliest_share: float = 0.0
    postpone_factor: float = 1.5
    postponements_without_tuning_length: int = 4
    points_per_dimension: int = 2
    points_constant: int = 2
    training_share: float = 0.75
    learns_during_tuning: bool = False
    refit_growth: float = 2.0
    first_refit_growth: float = 1.5
    negligible_error: float = 0.01
    learned_error: float = 0.1
    refit_improvement: float = 0.9
    refit_adaptation: int = 100
    simulated_draws: int = 100

    def with_coarse_model(self) -> ExplorationSchedule:
        """The schedule with the user's coarse model: no share of tuning before the first fit.

        The first fit comes after the early length (``max(50, 1.5 d)`` for RNSHMC's), not 20 %
        of tuning, and is postponed as before while its held-out error is poor. The 20 % were
        measured for a network learning the whole potential; a correction of a coarse model
        needs few points (``python -m benchmarks.coarse_model`` compares both starts).
        """
        return replace(self, earliest_share=0.0)

    def without_gradients(self) -> ExplorationSchedule:
        """The schedule for a model without gradients: longer exploration, more points.

        A random walk explores (one new point a draw, moving about ``1 / sqrt(d)`` of a
        posterior sd) and each point carries its value alone, not ``d + 1`` numbers; refits
        come each time the record grows by half, as values-only fits gain more from new points
        (pharmacokinetic ODE, 8 seeds of 1000 + 1000 draws: min bulk ESS 373-780 on six, against
        81-811 with doubling).
        """
        return replace(
            self,
            refit_growth=min(self.refit_growth, VALUES_ONLY_REFIT_GROWTH),
            shortest=max(self.shortest, VALUES_ONLY_SHORTEST),
            per_dimension=max(self.per_dimension, VALUES_ONLY_PER_DIMENSION),
            points_per_dimension=max(self.points_per_dimension, VALUES_ONLY_POINTS_PER_DIMENSION),
        )

    def exploration_length(self, tune: int | None, dim: int, chains: int = 1) -> int:
        """Exact draws per chain before the first fit, given ``tune`` (``None``: unknown).

        ``chains`` pooled chains share one record, so they share the exploration's draws:
        each explores ``1 / chains`` of them, and at least ``shortest`` (to leave its start
        behind and adapt its NUTS). The start rule still judges the fit on held-out draws and
        postpones a poor one, as for a single chain.
        """
        if self.early:
            length = min(self._first_start(dim, tune), self.latest_start(tune, dim))
        elif tune is None:
            length = self.without_tuning_length
        else:
            length = max(min(self.shortest, tune), round(self.tuning_share * tune))
        return max(min(self.shortest, length), math.ceil(length / chains))

    def latest_start(self, tune: int | None, dim: int) -> int:
        """The last draw at which a postponed start may still happen.

        Without the tuning length, the postponements count from the start ``earliest_share``
        does not delay: the bound stays where a short ``tune`` can still reach it.
        """
        if tune is not None:
            return max(1, round(self.tuning_share * tune))
        latest = self._early_length(dim)
        for _ in range(self.postponements_without_tuning_length):
            latest = math.ceil(self.postpone_factor * latest)
        return max(self._first_start(dim, None), min(self.without_tuning_length, latest))

    def postponed_start(self, draws_so_far: int) -> int:
        """The next try after a start postponed at ``draws_so_far``."""
        return math.ceil(self.postpone_factor * draws_so_far)

    def minimum_points(self, dim: int) -> int:
        """Training draws the first fit needs in ``dim`` dimensions."""
        return self.points_per_dimension * dim + self.points_constant

    def training_size(self, n_explored: int) -> int:
        """How many of the last ``n_explored`` exploration draws to train on."""
        return max(1, round(self.training_share * n_explored))

    def next_refit(self, n_points: int) -> int:
        """Record size at which a surrogate fitted on ``n_points`` is refitted."""
        return max(n_points + 1, round(self.refit_growth * n_points))

    @staticmethod
    def draws_to_grow(points: int, chains: int = 1) -> int:
        """The fewest draws that can add ``points`` to a record ``chains`` chains add to.

        Each chain's draw adds at most one point (its proposal, or its exact draw).
        """
        return math.ceil(max(points, 0) / chains)

    def least_refit(self, n_points: int, first: bool) -> int:
        """The fewest record points a refit after a fit on ``n_points`` may come with.

        ``next_refit`` for every refit but the ``first``, which may come with
        ``first_refit_growth`` times the points when the record cannot reach ``next_refit`` in
        time (at d = 320 and ``tune=1000`` the exploration alone takes 480 draws, and a refit at
        960 points could not follow).
        """
        planned = self.next_refit(n_points)
        if not first:
            return planned
        return min(planned, max(n_points + 1, math.ceil(self.first_refit_growth * n_points)))

    def keeps_learning(
        self,
        n_points: int,
        error: float,
        previous_error: float | None,
        draws_left: int | None,
        chains: int = 1,
    ) -> bool:
        """Whether to learn on after a fit on ``n_points`` with held-out gradient ``error``.

        ``previous_error`` is the last fit's (``None`` after the first fit, NaN for a fit that
        reported none); ``draws_left`` the tuning draws left (``None``: unknown); ``chains`` the
        chains whose draws add to the record, each at most a point a draw.
        """
        if not self.learns_during_tuning:
            return False
        first = previous_error is None
        if not first:  # a refit (the first fit is always refitted)
            if error < self.negligible_error:
                return False
            stagnating = not error < self.refit_improvement * previous_error
            if error < self.learned_error and stagnating:
                return False
        if draws_left is None:
            return True
        points_to_come = self.least_refit(n_points, first) - n_points
        return self.draws_to_grow(points_to_come, chains) + self.refit_adaptation <= draws_left

    def _first_start(self, dim: int, tune: int | None) -> int:
        share = round(self.earliest_share * (ASSUMED_TUNE if tune is None else tune))
        return max(self._early_length(dim), share)

    def _early_length(self, dim: int) -> int:
        return max(self.shortest, math.ceil(self.per_dimension * dim))


RNSHMC_SCHEDULE = ExplorationSchedule(
    shortest=50,
    per_dimension=1.5,
    early=True,
    earliest_share=EARLIEST_SHARE,
    points_per_dimension=1,
    learns_during_tuning=True,
)
"""Start after ``max(50, 1.5 d, 20 % of tuning)`` draws, postponed by half again while the fit
is poor, at latest at 70 % of tuning (the held-out check judges whether ``d + 2`` points
suffice); then learn from the tuning draws, refitting each time they double while that still
helps (the first refit, if the record cannot double in time, on half again as many points at the
last draw that leaves time to adapt after it)."""

ARNSHMC_SCHEDULE = RNSHMC_SCHEDULE
"""As RNSHMC's: ARNSHMC differs in what it does after tuning, not before."""

SPARSE_GRID_SCHEDULE = ExplorationSchedule(
    tuning_share=0.2,
    without_tuning_length=200,
    shortest=50,
    points_per_dimension=1,
)
"""Explore for 20 % of tuning, at least 50 draws (200 on PyMC 5): the exploration only places
the box and the grid is evaluated afresh."""
