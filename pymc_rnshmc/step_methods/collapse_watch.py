"""While tuning, notice when a surrogate's exact acceptance has collapsed.

A poor first fit can make every proposal implausible, so nothing is learned and no refit comes
(posteriordb ``sblrc-blr``: a fit with 29 % held-out error, exact acceptance 0 for good).
:class:`CollapseWatch` takes the exact acceptance of each tuning draw the surrogate makes and,
over consecutive windows of ``COLLAPSE_WINDOW`` draws, reports a window whose mean is below
``COLLAPSE_ACCEPT``; the warm-up then resumes exact exploration, or goes on with exact NUTS when
too little tuning is left for another start
(:meth:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup.watch_for_collapse`). numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["COLLAPSE_ACCEPT", "COLLAPSE_WINDOW", "CollapseWatch"]

COLLAPSE_WINDOW = 50
"""Surrogate draws of tuning over which the exact acceptance is watched for a collapse."""
COLLAPSE_ACCEPT = 0.05
"""Below this mean exact acceptance over ``COLLAPSE_WINDOW`` tuning draws, exact NUTS resumes."""


@dataclass
class CollapseWatch:
    """Means of the exact acceptance over consecutive windows of tuning draws.

    Parameters
    ----------
    window : int
        Draws per window.
    floor : float
        A window's mean below this is a collapse.
    """

    window: int = COLLAPSE_WINDOW
    floor: float = COLLAPSE_ACCEPT
    accepts: list[float] = field(default_factory=list)

    def record(self, accept: float) -> float | None:
        """Note one draw's exact acceptance (NaN counts as 0).

        Returns the window's mean when this draw closes a window whose mean is below ``floor``,
        else ``None``. A closed window starts the next one empty.
        """
        self.accepts.append(float(accept) if np.isfinite(accept) else 0.0)
        if len(self.accepts) < self.window:
            return None
        mean = float(np.mean(self.accepts))
        self.accepts = []
        return mean if mean < self.floor else None

    def restart(self) -> None:
        """Forget the open window (a new surrogate starts)."""
        self.accepts = []
