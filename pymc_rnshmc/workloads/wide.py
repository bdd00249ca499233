"""A model whose width is a parameter: a logistic regression with correlated predictors.

The "Wide models" measurements (d = 20 to 320) need one posterior whose dimension can grow while
its character stays: every coefficient identified, predictors correlated so that a diagonal mass
matrix is not enough, and a logp that costs a few milliseconds (20 000 rows).
"""

from __future__ import annotations

import numpy as np
import pymc as pm

__all__ = ["correlated_logistic_regression", "correlated_logistic_regression_data"]


def correlated_logistic_regression_data(
    dim: int, n_obs: int = 20_000, correlation: float = 0.7, seed: int = 35
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Design, responses and true coefficients.

    Predictors are standard normal with ``corr(x_i, x_j) = correlation^|i - j|`` (an AR(1)
    correlation); coefficients are ``N(0, 1 / sqrt(dim))``, so the linear predictor has about unit
    scale at every width.
    """
    rng = np.random.default_rng(seed)
    innovations = rng.normal(size=(n_obs, dim))
    design = np.empty((n_obs, dim))
    design[:, 0] = innovations[:, 0]
    scale = np.sqrt(1.0 - correlation**2)
    for j in range(1, dim):
        design[:, j] = correlation * design[:, j - 1] + scale * innovations[:, j]
    beta = rng.normal(0.0, 1.0 / np.sqrt(dim), size=dim)
    probabilities = 1.0 / (1.0 + np.exp(-(design @ beta)))
    responses = (rng.uniform(size=n_obs) < probabilities).astype("int64")
    return design, responses, beta


def correlated_logistic_regression(
    dim: int, n_obs: int = 20_000, correlation: float = 0.7, seed: int = 35
) -> pm.Model:
    """The regression as a PyMC model: ``beta ~ N(0, 1)``, ``y ~ Bernoulli(logit^-1(X beta))``."""
    design, responses, _ = correlated_logistic_regression_data(dim, n_obs, correlation, seed)
    with pm.Model() as model:
        x = pm.Data("X", design)
        beta = pm.Normal("beta", 0.0, 1.0, shape=dim)
        pm.Bernoulli("y", logit_p=x @ beta, observed=responses)
    return model
