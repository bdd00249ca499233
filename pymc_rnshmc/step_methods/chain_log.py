"""What a chain has done so far, for the messages when its model fails.

PyMC drops a chain's draws when a step raises, so the chain keeps its own (positions only, one
row a draw) and hands them to the :class:`~pymc_rnshmc.exceptions.ModelEvaluationError` that
stops it, with where it was; the first rejected evaluation of a chain is told once, as a
sampler warning saying where.
"""

from __future__ import annotations

import numpy as np
from pymc.stats.convergence import SamplerWarning, WarningType

from pymc_rnshmc.exceptions import ModelEvaluationError
from pymc_rnshmc.step_methods.model_failures import ParameterLayout

__all__ = ["ChainLog"]


class ChainLog:
    """A chain's draws so far, how many were tuning draws, and whether a failure was told.

    Parameters
    ----------
    sampler : str
        The sampler's name, for messages.
    """

    def __init__(self, sampler: str) -> None:
        self.sampler = sampler
        self.draws: list[np.ndarray] = []
        self.tuning_draws = 0
        self.told_failure = False

    def add(self, position: np.ndarray, tune: bool) -> None:
        """Keep one draw's position."""
        self.draws.append(position.copy())
        self.tuning_draws += bool(tune)

    def locate(self, error: ModelEvaluationError, activity: str, layout: ParameterLayout) -> None:
        """Tell ``error`` what the chain was doing, and give it the chain's draws so far."""
        error.where = f"{activity}, draw {len(self.draws)} of the chain"
        if self.draws:
            error.draws = layout.unravel_rows(self.draws)
        error.tuning_draws = self.tuning_draws

    def failure_warning(self, first: str | None, iteration: int) -> SamplerWarning | None:
        """The warning for the chain's first rejected evaluation (``first``), once a chain."""
        if first is None or self.told_failure:
            return None
        self.told_failure = True
        return SamplerWarning(
            WarningType.BAD_PARAMS,
            f"{self.sampler}: the model's logp failed ({first}, draw {len(self.draws)} of the "
            "chain). Such points are rejected, as PyMC's NUTS rejects a divergent trajectory, "
            "and counted in the sample stat model_failures. If the model should be defined "
            "there, check it with model.point_logps().",
            "warn",
            iteration,
        )
