"""Tuning on the surrogate alone: which tuning draws need no exact test, and what ends that.

Tuning draws are discarded, so once the surrogate has stopped learning they need not be exact
transitions: they may move on the surrogate's ``exp(-U~)`` with no exact evaluation
(:class:`~pymc_rnshmc.hmc.corrections.SurrogateTarget`). What they still do is adapt the step
size and carry the chain to where the kept draws start. :class:`AloneTuning` says which draws of
that stretch move alone, and keeps the one measurement that ends it: the surrogate's error
``U - U~`` where the chain went, against its value where the stretch began. The warm-up decides
when learning has ended; the chain evaluates the points. numpy only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from pymc_rnshmc.step_methods.wall_watch import WALL_NATS

__all__ = ["ALONE_CHECK_EVERY", "ALONE_DRIFT_NATS", "FINAL_EXACT_DRAWS", "AloneTuning"]

_log = logging.getLogger("pymc.rnshmc")

ALONE_CHECK_EVERY = 10
"""While tuning on the surrogate alone, every this many-th draw keeps the exact test; the point
it starts from is evaluated exactly, which checks the surrogate where the chain went."""
ALONE_DRIFT_NATS = WALL_NATS
"""Tuning on the surrogate alone ends for good once the surrogate's error ``U - U~`` at a checked
point differs by this much from its value where the stretch began: the chain has gone where the
surrogate's landscape is not the posterior's."""
FINAL_EXACT_DRAWS = 50
"""The last tuning draws keep the exact test: the chain returns to the posterior, and the step
size adapts on the draws the kept ones will be."""


@dataclass
class AloneTuning:
    """One warm-up's stretch of tuning on the surrogate alone.

    Parameters
    ----------
    enabled : bool
        The user's ``tune_on_surrogate``.
    name : str
        The sampler's name, for the log.
    """

    enabled: bool
    name: str = "RNSHMC"
    reference: float | None = None
    """The surrogate's error ``U - U~`` at the stretch's first checked point."""
    ended: bool = False

    def open_at(self, iteration: int, tune: int | None) -> bool:
        """Whether tuning draw ``iteration`` of ``tune`` may be in the stretch.

        Not on PyMC 5 (``tune`` unknown), not in the last ``FINAL_EXACT_DRAWS`` tuning draws,
        not once a check ended it.
        """
        if not self.enabled or self.ended or tune is None:
            return False
        return iteration < tune - FINAL_EXACT_DRAWS

    @staticmethod
    def moves_alone(iteration: int) -> bool:
        """Within the stretch, all draws but every ``ALONE_CHECK_EVERY``-th move alone."""
        return iteration % ALONE_CHECK_EVERY != 0

    def check(self, logp: float, surrogate_potential: float) -> None:
        """The exact ``logp`` and ``U~`` at a point of the stretch; it ends on a drift.

        The first point with both finite is the reference (the chain's last exact point when
        the stretch began). An unknown ``U~`` (NaN: the surrogate changed) is no evidence either
        way.
        """
        error = -float(logp) - float(surrogate_potential)
        if not np.isfinite(error):
            return
        if self.reference is None:
            self.reference = error
            return
        drift = abs(error - self.reference)
        if drift > ALONE_DRIFT_NATS:
            self.end(f"its surrogate's error drifted by {drift:.3g} nats")

    def end(self, reason: str) -> None:
        """End the stretch for good (``reason`` goes to the debug log)."""
        self.ended = True
        _log.debug(
            "%s tunes with the exact test again: %s, after moves on the surrogate alone.",
            self.name,
            reason,
        )

    def new_surrogate(self) -> None:
        """A new surrogate: its error is measured afresh."""
        self.reference = None
