"""A reference for the correlated logistic regression, by importance sampling from its Laplace fit.

The wide models (:func:`pymc_rnshmc.workloads.correlated_logistic_regression`) have no closed
form, and a reference drawn by another MCMC sampler would share its failure modes. This one uses
no Markov chain: numpy and scipy only.

The posterior is ``beta ~ N(0, I)``, ``y_i ~ Bernoulli(logit^-1(x_i . beta))``. Its log density
is strictly concave, so Newton's method with the exact Hessian ``H = X' W X + I`` finds the mode.
Proposals are Gaussian at the mode with covariance ``ENVELOPE_SCALE^2 H^-1``; with 20,000 rows
the posterior is close to it (the sd of the log weights is about 0.5 nats at d = 80 and 0.7 at
d = 160), so self-normalised importance sampling has an effective size near the pool's.

Why not exact draws by rejection from the same Gaussian: its weights are unbounded (the prior is
wider than the likelihood far out), and inside a ball holding all but 1e-9 of the proposals the
largest log weight is 4 to 7 nats above the typical one at d = 80, so rejection keeps 1-5 % of
the proposals. Instead:

* **means and quantiles** (:meth:`LogisticPosterior.expectations`, :meth:`quantiles`) are
  importance-weighted over a pool of :data:`POOL` proposals, with their own standard errors
  (:attr:`mean_standard_error`, :meth:`share_standard_error`; delta method);
* **draws** (:meth:`LogisticPosterior.sample`) are resampled with replacement from a fresh pool of
  ``RESAMPLE_POOL_FACTOR * n`` proposals in proportion to their weights (sampling-importance-
  resampling). Their law differs from the posterior by ``O(1 / pool)`` in any bounded expectation,
  and ``n`` draws from a pool of effective size ``e`` repeat about ``n^2 / (2 e)`` points (1-2 %
  of the draws here), which raises a check's false-alarm rate by about as much. The draws are
  therefore approximately, not exactly, posterior draws; what a check built on them can show is
  an error above that level.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pymc as pm
from scipy import special

from pymc_rnshmc.workloads import correlated_logistic_regression
from pymc_rnshmc.workloads.wide import correlated_logistic_regression_data
from tests.stationarity import ExactPosterior, Expectation

__all__ = ["ENVELOPE_SCALE", "POOL", "RESAMPLE_POOL_FACTOR", "LogisticPosterior"]

ENVELOPE_SCALE = 1.03
"""The proposals' sd in the Laplace approximation's sds."""
POOL = 200_000
"""Proposals behind the reference means and quantiles."""
RESAMPLE_POOL_FACTOR = 50
"""A pool of this many proposals per resampled draw."""
BATCH = 2_000
"""Proposals evaluated together (one ``X @ B`` product)."""


class LogisticPosterior(ExactPosterior):
    """The correlated logistic regression's posterior: importance-sampled reference and draws.

    Parameters
    ----------
    dim : int
        Coefficients.
    n_obs, correlation, seed
        As :func:`~pymc_rnshmc.workloads.wide.correlated_logistic_regression_data`.
    pool : int
        Proposals behind :meth:`expectations` and :meth:`quantiles`.
    """

    name = "logistic"

    def __init__(
        self,
        dim: int,
        n_obs: int = 20_000,
        correlation: float = 0.7,
        seed: int = 35,
        pool: int = POOL,
    ) -> None:
        self.dim, self.n_obs, self.correlation, self.data_seed = dim, n_obs, correlation, seed
        self.design, responses, _ = correlated_logistic_regression_data(
            dim, n_obs, correlation, seed
        )
        self.responses = responses.astype(float)
        self.labels = tuple(f"beta[{i}]" for i in range(dim))
        self.mode, hessian = self._newton_mode()
        self.chol = np.linalg.cholesky(np.linalg.inv(hessian))  # the Laplace's factor
        self.pool, self.weights = self._weighted_pool(pool, np.random.default_rng([seed, dim]))
        self.mean = self.weights @ self.pool

    # ---------------------------------------------------------------- the density
    def log_density(self, betas: np.ndarray) -> np.ndarray:
        """Unnormalised log posterior of ``(m, d)`` coefficient rows."""
        eta = self.design @ betas.T
        log_likelihood = self.responses @ eta - np.logaddexp(0.0, eta).sum(axis=0)
        return log_likelihood - 0.5 * np.sum(betas**2, axis=1)

    def _newton_mode(self) -> tuple[np.ndarray, np.ndarray]:
        beta = np.zeros(self.dim)
        for _ in range(50):
            p = special.expit(self.design @ beta)
            gradient = self.design.T @ (self.responses - p) - beta
            hessian = (self.design.T * (p * (1.0 - p))) @ self.design + np.eye(self.dim)
            step = np.linalg.solve(hessian, gradient)
            beta = beta + step  # a concave, nearly quadratic log density: full Newton steps
            if np.max(np.abs(step)) < 1e-10:
                break
        else:
            raise RuntimeError("Newton's method did not converge to the logistic mode")
        return beta, hessian

    # ---------------------------------------------------------------- importance sampling
    def _weighted_pool(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``m`` proposals and their normalised importance weights."""
        normals = rng.standard_normal((m, self.dim))
        proposals = self.mode + ENVELOPE_SCALE * normals @ self.chol.T
        log_weights = np.empty(m)
        for i in range(0, m, BATCH):  # log p - log q, q's constant dropped
            rows = slice(i, i + BATCH)
            log_weights[rows] = self.log_density(proposals[rows])
            log_weights[rows] += 0.5 * np.sum(normals[rows] ** 2, axis=1)
        weights = np.exp(log_weights - log_weights.max())
        return proposals, weights / weights.sum()

    @property
    def effective_pool(self) -> float:
        """Kish's effective size of the reference pool, ``1 / sum(w^2)``."""
        return float(1.0 / np.sum(self.weights**2))

    @property
    def mean_standard_error(self) -> np.ndarray:
        """Standard errors of the reference means (delta method)."""
        return np.sqrt(self.weights**2 @ (self.pool - self.mean) ** 2)

    def share_standard_error(self, probability: float) -> np.ndarray:
        """Standard error of the weighted share below the reference ``probability``-quantile."""
        below = self.pool < self.quantiles([probability])[0]
        return np.sqrt(self.weights**2 @ (below - probability) ** 2)

    # ---------------------------------------------------------------- ExactPosterior
    def model(self, gradient: bool = True) -> pm.Model:
        if not gradient:
            raise ValueError("the logistic reference is only sampled with gradients")
        return correlated_logistic_regression(
            self.dim, self.n_obs, self.correlation, self.data_seed
        )

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, d)`` draws by sampling-importance-resampling (see the module's docstring)."""
        proposals, weights = self._weighted_pool(RESAMPLE_POOL_FACTOR * n, rng)
        return proposals[rng.choice(len(proposals), size=n, p=weights)]

    def expectations(self) -> dict[str, Expectation]:
        mean = self.mean
        return {
            "mean": (lambda x: x, mean),
            "variance": (lambda x: (x - mean) ** 2, self.weights @ (self.pool - mean) ** 2),
        }

    def quantiles(self, probabilities: Sequence[float]) -> np.ndarray:
        """Weighted marginal quantiles: per coordinate, the first sorted point whose cumulative
        weight reaches ``p``."""
        order, cumulative = self._sorted
        columns = np.arange(self.dim)
        return np.array(
            [
                self.pool[order[np.argmax(cumulative >= p, axis=0), columns], columns]
                for p in probabilities
            ]
        )

    @functools.cached_property
    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """Per coordinate, the pool's order and the cumulative weights in that order."""
        order = np.argsort(self.pool, axis=0)
        return order, np.cumsum(self.weights[order], axis=0)
