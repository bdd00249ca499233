"""A two-level delayed-acceptance baseline (MLDA with one coarse level), for the benchmarks only.

Not a product feature: the comparison that :mod:`benchmarks.coarse_model` needs for the coarse
model's issue. PyMC shipped MLDA until version 4 and its port is not maintained. tinyDA has it:
:mod:`benchmarks.tinyda_baseline` runs tinyDA 0.9.21 in its own environment on the same PDE. This
is a minimal version written from the paper, as a PyMC step, so that the comparison measures it
the same way as every other sampler. With short coarse subchains it is weaker than tinyDA's
(on the 60 x 60 PDE it needed 4.5 times tinyDA's fine solves to ESS 1000 with 5 coarse steps a
draw and twice with 25; its coarse proposal adapts differently); with 100 they agree.

Each draw runs ``subsampling`` steps of a random-walk Metropolis chain on the coarse posterior
from the current state, and the end point is accepted by the fine model with the two-stage ratio
``[pi_f(y) pi_c(x)] / [pi_f(x) pi_c(y)]`` (Christen and Fox 2005; Lykkegaard et al. 2023, with
one coarse level). A random-walk kernel reversible for the coarse posterior makes the
subsampled chain a valid proposal, so the draws are exact for the fine posterior once the
kernel is frozen. While tuning, the coarse chain's proposal adapts (Haario et al. 2001): its
covariance is the coarse states' covariance, its scale steered by Robbins-Monro towards an
acceptance of 0.234. Costs: one fine logp a draw and ``subsampling`` coarse logps (no
gradients).

References
----------
.. [1] Lykkegaard, M. B., Dodwell, T. J., Fox, C., Mingas, G., & Scheichl, R. (2023). Multilevel
   delayed acceptance MCMC. SIAM/ASA Journal on Uncertainty Quantification, 11(1), 1-30.
.. [2] Christen, J. A., & Fox, C. (2005). Markov chain Monte Carlo using an approximation.
   Journal of Computational and Graphical Statistics, 14(4), 795-810.
.. [3] Haario, H., Saksman, E., & Tamminen, J. (2001). An adaptive Metropolis algorithm.
   Bernoulli, 7(2), 223-242.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.model import modelcontext
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence

from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.step_methods.variables import continuous_value_vars

__all__ = ["TwoLevelDelayedAcceptance"]

TARGET_COARSE_ACCEPT = 0.234
"""Acceptance the coarse random walk's scale is steered to while tuning."""
COVARIANCE_EVERY = 50
"""Tuning draws between updates of the coarse proposal's covariance."""


class TwoLevelDelayedAcceptance(ArrayStepShared):
    """MLDA with one coarse level: a subsampled coarse random walk, accepted by the fine model.

    Parameters
    ----------
    coarse : pymc.Model
        The coarse model: the same free variables (names, shapes, transforms).
    subsampling : int
        Coarse random-walk steps per draw (PyMC's MLDA default was 5).
    vars, model, rng
        As for PyMC's steps.

    References
    ----------
    .. [1] Lykkegaard, M. B., et al. (2023). Multilevel delayed acceptance MCMC. SIAM/ASA JUQ,
       11(1), 1-30.
    """

    name = "two_level_da"
    default_blocked = True
    stats_dtypes_shapes: ClassVar[dict] = {
        "accept": (np.float64, []),
        "accepted": (bool, []),
        "coarse_accept": (np.float64, []),
        "n_logp_evals": (np.int64, []),
        "n_gradient_evals": (np.int64, []),
        "n_coarse_evals": (np.int64, []),
        "tune": (bool, []),
        "perf_counter_diff": (np.float64, []),
    }

    def __init__(self, vars=None, *, coarse: pm.Model, subsampling: int = 5, model=None, rng=None):
        model = modelcontext(model)
        vars = continuous_value_vars(vars, model, "TwoLevelDelayedAcceptance")
        point = model.initial_point()
        self.fine = ExactModel(model, vars, point, gradient=False)
        by_name = {v.name: v for v in coarse.value_vars}
        coarse_function = coarse.logp_dlogp_function(
            [by_name[v.name] for v in vars],
            compute_grads=False,
            ravel_inputs=True,
            initial_point=coarse.initial_point(),
        )
        self._coarse = coarse_function._pytensor_function
        self._coarse.trust_input = True
        self.subsampling = int(subsampling)
        dim = self.fine.size
        self.tune = True
        self.log_scale = math.log(2.38 / math.sqrt(dim))
        self.factor = np.eye(dim)
        self._tuned = 0
        self._sum = np.zeros(dim)
        self._outer = np.zeros((dim, dim))
        self._cache: tuple[np.ndarray, float, float] | None = None
        super().__init__(vars, self.fine._shared, blocked=True, rng=rng)

    def coarse_logp(self, position: np.ndarray) -> float:
        """The coarse model's logp (``-inf`` where it fails or is not finite)."""
        try:
            value = float(self._coarse(self.fine.cast(position))[0])
        except Exception:
            return -np.inf
        return value if math.isfinite(value) else -np.inf

    def astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict]]:
        """One draw: ``subsampling`` coarse steps, then the fine two-stage test."""
        began = time.perf_counter()
        x = np.asarray(q0.data, dtype=float)
        fine_x, coarse_x, evaluations = self._at(x)
        y, coarse_y, coarse_accepted = x, coarse_x, 0
        for _ in range(self.subsampling):
            proposal = y + math.exp(self.log_scale) * self.factor @ self.rng.standard_normal(y.size)
            coarse_proposal = self.coarse_logp(proposal)
            accept = min(1.0, math.exp(min(0.0, coarse_proposal - coarse_y)))
            if self.rng.uniform() < accept:
                y, coarse_y = proposal, coarse_proposal
                coarse_accepted += 1
            if self.tune:
                self._adapt(y, accept)
        fine_y = self.fine.logp(y) if coarse_accepted else fine_x
        log_ratio = (fine_y - fine_x) + (coarse_x - coarse_y)
        accept = 1.0 if not coarse_accepted else min(1.0, math.exp(min(0.0, log_ratio)))
        accepted = bool(coarse_accepted) and self.rng.uniform() < accept
        if accepted:
            x, fine_x, coarse_x = y, fine_y, coarse_y
        self._cache = (x.copy(), fine_x, coarse_x)
        stats = {
            "accept": accept,
            "accepted": accepted,
            "coarse_accept": coarse_accepted / self.subsampling,
            "n_logp_evals": evaluations + int(coarse_accepted > 0),
            "n_gradient_evals": 0,
            "n_coarse_evals": self.subsampling + (evaluations > 0),
            "tune": self.tune,
            "perf_counter_diff": time.perf_counter() - began,
        }
        return RaveledVars(x, q0.point_map_info), [stats]

    def _at(self, x: np.ndarray) -> tuple[float, float, int]:
        """Fine and coarse logp at the chain's point: cached, or evaluated (one fine logp)."""
        if self._cache is not None and np.array_equal(self._cache[0], x):
            return self._cache[1], self._cache[2], 0
        return self.fine.logp(x), self.coarse_logp(x), 1

    def _adapt(self, state: np.ndarray, accept: float) -> None:
        """Robbins-Monro on the log scale; the covariance of the coarse states, now and then."""
        self._tuned += 1
        self.log_scale += (accept - TARGET_COARSE_ACCEPT) / self._tuned**0.6
        self._sum += state
        self._outer += np.outer(state, state)
        if self._tuned % COVARIANCE_EVERY == 0:
            mean = self._sum / self._tuned
            covariance = self._outer / self._tuned - np.outer(mean, mean)
            covariance += 1e-8 * np.eye(state.size) * max(np.trace(covariance) / state.size, 1e-12)
            try:
                self.factor = np.linalg.cholesky(covariance)
            except np.linalg.LinAlgError:
                pass

    def stop_tuning(self) -> None:
        """Freeze the coarse proposal: from here every draw is an exact transition."""
        self.tune = False

    @staticmethod
    def competence(var, has_grad):
        """Never assigned automatically: a baseline for the benchmarks."""
        return Competence.INCOMPATIBLE
