"""When a warm-up refits its surrogate while it learns during tuning, and when it stops.

After each fit the plan says at what record size the next refit comes
(:meth:`LearningPlan.after_fit`), or that learning has ended: the schedule's
(:meth:`~pymc_rnshmc.step_methods.schedule.ExplorationSchedule.keeps_learning`) says the fit has
little left to learn. At each tuning draw it drops the refit once it could not come in time for
the step size to re-adapt after it, or would cost more than it can save
(:meth:`LearningPlan.refit_due`, the economy's
:meth:`~pymc_rnshmc.step_methods.economy.Economy.refit_pays`). A safety-net draw that crossed a
wall of the surrogate brings a refit at once, a bounded number of times
(:meth:`LearningPlan.refit_behind_wall`). The warm-up asks; the plan holds no record, surrogate
or model, only sizes and draw counts, so its rules are tested on numbers.
"""

from __future__ import annotations

import logging

import numpy as np

from pymc_rnshmc.step_methods.economy import Economy
from pymc_rnshmc.step_methods.schedule import ExplorationSchedule

__all__ = ["WALL_REFITS", "WALL_REFIT_GROWTH", "LearningPlan"]

_log = logging.getLogger("pymc.rnshmc")

WALL_REFIT_GROWTH = 1.1
"""A net draw behind a wall brings a refit once the record has grown by this factor since the
last fit ..."""
WALL_REFITS = 2
"""... at most this many times in a chain. A surrogate that cannot represent the region keeps
its wall: a test surrogate with a wall built in (``tests/step_methods/helpers.py``) brought 30
refits of 13 s each in two chains of 800 tuning draws without this limit."""


class LearningPlan:
    """The record size of a warm-up's next refit, or ``None`` once learning has ended.

    Parameters
    ----------
    schedule : ExplorationSchedule
        Its refit growth, learning thresholds and ``refit_adaptation``.
    learns : bool
        Whether the warm-up learns during tuning at all (a grid, or values only, may not).
    economy : Economy
        Weighs what a refit costs against what it can save.
    name : str
        The sampler's name, for the log.
    """

    def __init__(
        self, schedule: ExplorationSchedule, learns: bool, economy: Economy, name: str
    ) -> None:
        self.schedule = schedule
        self.learns = learns
        self.economy = economy
        self.name = name
        self.next_refit: int | None = None
        """Refit once the record holds this many points; ``None``: no refit to come."""
        self.least_refit: int | None = None
        """... or with at least this many at the last draw a refit can come in time
        (:meth:`~pymc_rnshmc.step_methods.schedule.ExplorationSchedule.least_refit`)."""
        self.fits = 0
        """Fits of the current surrogate's line: the first is always refitted (counted, since
        a surrogate may report no held-out error)."""
        self.fit_error = np.nan
        """The last fit's held-out gradient error (its successor must improve on it)."""
        self.for_wall = False
        """The next refit is for a wall a safety-net draw crossed (not weighed against cost).
        Set only with a refit planned, and cleared by the next fit or by :meth:`stop`: a wall's
        refit that could not come in time once kept tuning from moving on the surrogate alone
        to the end."""
        self.wall_refits = 0

    @property
    def wall_refits_spent(self) -> bool:
        """Whether no more refits can come for a wall (none while tuning, or ``WALL_REFITS``)."""
        return not self.learns or self.wall_refits >= WALL_REFITS

    @property
    def learning(self) -> bool:
        """Whether a refit is planned (tuning proposals' exact gradients are then recorded)."""
        return self.next_refit is not None

    def after_fit(
        self,
        record_size: int,
        error: float,
        tuning_draws_left: int | None,
        end_of_tuning: bool,
        chains: int = 1,
    ) -> None:
        """Plan the next refit after a fit whose held-out gradient error is ``error``.

        ``chains``: the chains whose draws add to the record. A wall's request is met by any fit.
        """
        first = self.fits == 0
        self.fits += 1
        previous_error = None if first else self.fit_error
        learning = (
            self.learns
            and not end_of_tuning
            and self.schedule.keeps_learning(
                record_size, error, previous_error, tuning_draws_left, chains
            )
        )
        self.next_refit = self.schedule.next_refit(record_size) if learning else None
        self.least_refit = self.schedule.least_refit(record_size, first) if learning else None
        self.fit_error = error
        self.for_wall = False

    def refit_due(
        self, record_size: int, tuning_draws_left: int | None, draws_left: int, chains: int
    ) -> bool:
        """Whether to refit now; drops the plan once a refit cannot come in time or pay.

        A refit needs ``refit_adaptation`` tuning draws after it (when the tuning length is
        known). It comes once the record holds ``next_refit`` points, or at the last draw that
        leaves those tuning draws, with at least ``least_refit``. Learning stops as soon as
        that could not happen (each chain's draw adds at most a point to the record) or the
        refit would not pay for itself when due. ``draws_left``: tuning and kept draws to come
        for each of the ``chains`` that share the surrogate (and its record).
        """
        if self.next_refit is None:
            return False
        if not self._in_time(record_size, tuning_draws_left, chains):
            self.stop()
            _log.debug("%s stops learning: no refit can follow.", self.name)
            return False
        if not (self.for_wall or self._pays(record_size, draws_left, chains)):
            return False
        last_chance = (
            tuning_draws_left is not None and tuning_draws_left <= self.schedule.refit_adaptation
        )
        return record_size >= (self.least_refit if last_chance else self.next_refit)

    def _in_time(self, record_size: int, tuning_draws_left: int | None, chains: int) -> bool:
        """Whether a refit can still come with ``refit_adaptation`` tuning draws after it."""
        if tuning_draws_left is None:
            return True
        draws = self.schedule.draws_to_grow(self.least_refit - record_size, chains)
        return draws <= tuning_draws_left - self.schedule.refit_adaptation

    def _pays(self, record_size: int, draws_left: int, chains: int) -> bool:
        """Whether the next refit, when due, will cost less than it can save; else it stops.

        Weighed at every learning draw, with the draws that will be left when the record reaches
        ``next_refit``. Refits for a wall are not weighed (they are for trust).
        """
        draws_to_come = self.schedule.draws_to_grow(self.next_refit - record_size, chains)
        draws_then = max(draws_left - draws_to_come, 0) * chains
        points = max(self.next_refit, record_size)
        if self.economy.refit_pays(points, draws_then):
            return True
        self.stop()
        _log.info(
            "%s stops refitting: a refit on %d points would cost more than it can save.",
            self.name,
            points,
        )
        return False

    def refit_behind_wall(self, record_size: int, fitted_size: int) -> None:
        """Refit at the next draw: the record holds a net draw that crossed a wall.

        Only when learning during tuning, once the record has grown by ``WALL_REFIT_GROWTH``
        since the last fit (on ``fitted_size`` points), and at most ``WALL_REFITS`` times a
        chain: a wall the refits cannot remove (a surrogate that cannot represent the region)
        costs a few refits, not one for every net draw behind it.
        """
        if not self.learns or self.wall_refits >= WALL_REFITS:
            return
        if record_size < WALL_REFIT_GROWTH * fitted_size:
            return
        self.wall_refits += 1
        self.for_wall = True
        if self.next_refit is None or self.next_refit > record_size:
            self.next_refit = self.least_refit = record_size

    def refit_now(self, record_size: int) -> None:
        """Refit at the next draw, if a refit is planned at all. Weighed as any refit is.

        For a poor fit the verdict kept, whose trajectories were chosen without a scan: the
        refit chooses them with the setup budget.
        """
        if self.next_refit is not None:
            self.next_refit = self.least_refit = record_size

    def restart(self) -> None:
        """No more refits of this surrogate; the next fit (after exploring again) is a first."""
        self.stop()
        self.fits, self.fit_error = 0, np.nan
        self.wall_refits = 0

    def stop(self) -> None:
        """No more refits (learning has ended), a wall's included."""
        self.next_refit = self.least_refit = None
        self.for_wall = False
