"""When a warm-up's first fit comes, and when a poor one waits for more exploration.

The exploration runs for the schedule's length (or the user's ``exploration_steps``); a first fit
whose held-out error is above ``start_error``, or that could not be made, is postponed while the
schedule allows another try before its latest start
(:meth:`~pymc_rnshmc.step_methods.schedule.ExplorationSchedule.latest_start`); after a collapse
of the surrogate's acceptance the exploration resumes until the next try, if one is still to
come. The warm-up asks; the rule holds only draw counts, so it is tested on numbers.
"""

from __future__ import annotations

import logging

from pymc_rnshmc.step_methods.schedule import ExplorationSchedule

__all__ = ["StartRule"]

_log = logging.getLogger("pymc.rnshmc")


class StartRule:
    """The draw of the (next) first fit, postponed while fits are poor and time is left.

    Parameters
    ----------
    schedule : ExplorationSchedule
    exploration_steps : int, optional
        The user's exploration length, instead of the schedule's.
    start_error : float, optional
        A first fit with a held-out error above this is postponed while it can be (``None``:
        never).
    tune : int, optional
        The tuning length (``None`` on PyMC 5, which does not tell the step).
    dim : int
    chains : int
        Chains that share the exploration (each explores ``1 / chains`` of it).
    name : str
        The sampler's name, for the log.
    """

    def __init__(
        self,
        schedule: ExplorationSchedule,
        exploration_steps: int | None,
        start_error: float | None,
        tune: int | None,
        dim: int,
        chains: int = 1,
        name: str = "",
    ) -> None:
        self.schedule = schedule
        self.exploration_steps = exploration_steps
        self.start_error = start_error
        self.tune, self.dim, self.chains = tune, dim, chains
        self.name = name
        self.postponed_until: int | None = None
        """The draw of the next try, once a start was postponed or the exploration resumed."""

    def exploration_length(self) -> int:
        """Exploration draws before the (next) first fit."""
        if self.postponed_until is not None:
            return self.postponed_until
        if self.exploration_steps is not None:
            return self.exploration_steps
        return self.schedule.exploration_length(self.tune, self.dim, self.chains)

    def postpones(self, error: float, iteration: int, end_of_tuning: bool) -> bool:
        """Whether a fit with held-out ``error`` at ``iteration`` waits for more exploration.

        Early draws may not have reached the bulk yet. Not at the end of tuning, nor past the
        latest start.
        """
        if end_of_tuning or self.start_error is None or not error > self.start_error:
            return False
        return self.postpone(iteration)

    def postpone(self, iteration: int) -> bool:
        """Keep exploring (``True``) if the schedule allows another try before its latest."""
        if not self.schedule.early:
            return False
        next_try = self.schedule.postponed_start(iteration)
        if next_try > self.schedule.latest_start(self.tune, self.dim):
            return False
        self.postponed_until = next_try
        _log.debug("%s keeps exploring until draw %d.", self.name, next_try)
        return True

    def restart(self, iteration: int) -> int | None:
        """The draw of the next try after a collapse at ``iteration``; ``None`` if too late."""
        restart = self.schedule.postponed_start(iteration + 1)
        if restart > self.schedule.latest_start(self.tune, self.dim):
            return None
        self.postponed_until = restart
        return restart
