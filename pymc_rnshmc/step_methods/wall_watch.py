"""Look where the surrogate's own trajectories do not go: the exact draws that land behind a wall.

A surrogate that rises far above the exact potential somewhere the posterior has mass builds a
wall: its trajectories turn back before they arrive, and a chain that gets there cannot leave
with them. The kernel stays exact, but the region is under-visited, and nothing in the chain's
own statistics shows it: its ESS is computed from where it went. The safety net's exact draws
do not follow the surrogate, so they are the chain's only view behind such a wall. For each
one that moves, the wall it crossed is how much more the surrogate's potential rose than the
exact one along the move,

``wall = (U~(q1) - U~(q0)) - (U(q1) - U(q0))``

(the negative of the ``surrogate_error`` statistic). Surrogate trajectories reach ``q1`` about
``exp(-wall)`` times as often as they should. :class:`WallWatch` keeps the highest wall a chain
met after tuning and says so once, naming the parameters there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["WALL_NATS", "WallWatch", "wall_between"]

WALL_NATS = 10.0
"""A wall this high (surrogate trajectories reach behind it ``exp(-10)`` = 1/22,000 as often as
they should) is told, and while tuning brings a refit. The banana's first fits put 40 to 765
nats at the far end of an arm, where the chains then under-visited the tail. In the trust
battery (``benchmarks/trust_battery.py``: two bananas, a sharper one, a log-gamma and a
Student-t, 40 runs, with the surrogate's ceiling on) the highest wall a run's net met after
tuning had a median of 9.2 nats, and 19 runs met one of 10 or more, so the warning is common
on curved and heavy-tailed posteriors.
It is a measured threshold, not a bound: two banana runs with tails 6.6 and 8.2 MCSE off met
walls of only 3.4 and 4.8 nats."""


def wall_between(surrogate, start, end: np.ndarray, end_logp: float) -> float:
    """The wall an exact move from ``start`` (a cached point) to ``end`` crossed, in nats.

    NaN if the move stayed put or either potential is not finite.
    """
    if np.array_equal(start.position, end):
        return math.nan
    with np.errstate(all="ignore"):
        wall = float(surrogate.potential(end)) - float(surrogate.potential(start.position))
        wall += float(end_logp) - start.logp
    return wall if math.isfinite(wall) else math.nan


@dataclass
class WallWatch:
    """Keeps the highest wall an exact draw crossed after tuning; tells it once.

    Parameters
    ----------
    sampler : str
        The sampler's name, for the message.
    threshold : float
        Walls at least this high, in nats, are told.
    """

    sampler: str
    threshold: float = WALL_NATS
    highest: float = -math.inf
    told: bool = False

    def record(self, wall: float, where: str) -> str | None:
        """Note the wall crossed by one exact draw that landed at ``where`` (parameters).

        Returns the message the first time a wall reaches the threshold, else ``None``.
        """
        if not math.isfinite(wall):
            return None
        self.highest = max(self.highest, wall)
        if self.told or wall < self.threshold:
            return None
        self.told = True
        return (
            f"{self.sampler}: an exact draw of the safety net landed at {where}, where the "
            f"surrogate's potential is {wall:.0f} nats higher, relative to the chain's previous "
            "point, than the model's: the surrogate's trajectories reach that region about "
            f"exp(-{wall:.0f}) times as often as they should. The draws stay exact and the "
            "safety net's exact draws keep visiting it, but slowly: the ESS may not see how "
            "little the chain went there. Give the exploration more draws (tune, "
            "exploration_steps) so the surrogate learns that region, or raise safety_net."
        )
