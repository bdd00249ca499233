"""The safety net: a fixed share of the draws are exact transitions, on by default.

A surrogate that is wrong somewhere the posterior has mass leaves the kernel exact but can make
it crawl there: where the surrogate rises far above the true potential, its trajectories turn
back before they arrive, and the rare proposals that do arrive leave a chain that cannot get out.
The chain's own ESS estimate does not see a region it never visits, so the result looks precise
and is wrong. (The pharmacokinetic ODE without gradients: a values-only surrogate 15 nats too
high at ``log K_m = 3`` on the ``K_m``-``V_m`` ridge and 87 at 4, where exploration had left no
training point on the ridge's crest; chains of 2 x 1000 draws visited ``log K_m > 2.64`` in
1.1 % of draws against the reference's 2.8 %, and without the net put the mean of ``log V_m``
3.8-4.3 MCSE low in three of six seeds.)

With the safety net, each draw after tuning is, with a fixed probability drawn independently of
the chain's state, a transition of an exact kernel that does not use the surrogate: the fixed
random walk the step explored with when the model has no gradient, PyMC's NUTS with the step
size and mass matrix it adapted while exploring otherwise. Each of the two kernels leaves the
posterior invariant, so their mixture does (Tierney 1994), whatever the surrogate.
The exact moves reach where the surrogate's do not, at their own pace, and the ESS estimate
then reflects that pace.

It is on by default for every model. With gradients the same coin is also drawn while tuning,
once the surrogate runs: the net's NUTS draws are then recorded with their exact gradients, and
one that lands behind a wall brings a refit (``SurrogateHMC._watch_wall``), so the frozen
surrogate has seen where its first fit's trajectories never went. The banana of
:mod:`~pymc_rnshmc.surrogates.ceiling`, whose first fit walls off the arm tips, is where this
was measured (``docs/reliability.md``).

References
----------
.. [1] Tierney, L. (1994). Markov chains for exploring posterior distributions. The Annals of
   Statistics, 22(4), 1701-1728.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["GRADIENT_FREE_PROBABILITY", "GRADIENT_PROBABILITY", "SafetyNet"]

GRADIENT_FREE_PROBABILITY = 0.2
"""Default share of exact draws for a model without gradients in up to five dimensions; ``1 / d``
beyond. Each costs one logp, as a surrogate draw does, but a random-walk step moves only about
``2.4 / sqrt(d)`` posterior sds, so in many dimensions it buys little and still takes a surrogate
draw's place (elliptic PDE without adjoint, d = 20, seed 1: min bulk / tail ESS 667 / 354 without
the net, 166 / 86 at 20 %, 680 / 310 at 5 %)."""


GRADIENT_PROBABILITY = 0.1
"""Default share of exact NUTS draws for a model with gradients. On the banana with a one-sided
tail (2 data sets x 4 seeds x 2 x (1000 + 10 000) draws), the default without the net put the
mean of ``b1`` 3.6 to 6.9 MCSE off in three of four runs, with ESS in the thousands; with the net
at 0.1 and the surrogate's ceiling (``RandomNetworkSurrogate(ceiling=True)``, since turned off
by default), every mean was within 2.7 MCSE; with the net alone (the default), four runs of one
data set were within 2.5 MCSE, at bulk ESS of 270 to 2628. Each net draw costs a NUTS trajectory
of exact gradients, so the kept draws cost about ``0.9 + 0.1 (n_steps + 1)`` exact evaluations
each instead of one (``docs/benchmarks.md`` measures the whole call)."""


@dataclass(frozen=True)
class SafetyNet:
    """With ``probability``, a draw after tuning is an exact transition, not a surrogate one.

    Parameters
    ----------
    probability : float
        In ``[0, 1)``; 0 turns the net off.
    """

    probability: float

    def __post_init__(self) -> None:
        probability = self.probability
        if (
            isinstance(probability, bool)
            or not isinstance(probability, numbers.Real)
            or not 0.0 <= probability < 1.0
        ):
            raise ValueError(
                f"safety_net must be a probability in [0, 1), got {probability!r}: the share "
                "of draws after tuning that are exact transitions instead of surrogate ones."
            )

    @classmethod
    def default(cls, probability: float | None, gradient_free: bool, dim: int) -> SafetyNet:
        """The user's ``probability``, or the default for a model of ``dim`` coordinates.

        ``GRADIENT_PROBABILITY`` with gradients; without them ``GRADIENT_FREE_PROBABILITY`` up
        to five dimensions, ``1 / dim`` beyond.
        """
        if probability is None:
            if gradient_free:
                probability = min(GRADIENT_FREE_PROBABILITY, 1.0 / dim)
            else:
                probability = GRADIENT_PROBABILITY
        return cls(probability)

    def catches(self, rng: np.random.Generator) -> bool:
        """Whether this draw is an exact one: a coin independent of the chain's state.

        Draws no random number when the net is off, so the chain's stream is unchanged then.
        """
        return self.probability > 0.0 and bool(rng.uniform() < self.probability)
