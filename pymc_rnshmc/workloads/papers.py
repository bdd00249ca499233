"""The papers' workloads as PyMC models, for examples, benchmarks and tests.

* ``logistic_regression``: RNS-HMC paper section 5.1. ``X = (0.1 * 1, X1)`` with
  ``X1 ~ N(0, I / 100)``, ``beta_true ~ U[0, 1]^d``, ``y ~ Bernoulli(sigmoid(X beta_true))`` and
  prior ``beta ~ N(0, 100 I)``; d = 50 and N = 100000 in the paper.
* ``banana``: sparse-grid HMC paper section 4.2. ``b ~ N(0, I_2)``,
  ``y_i ~ N(b1 + b2^2, 2^2)``, 100 observations generated with ``b1 + b2^2 = 1``.
* ``small_logistic_regression``: sparse-grid HMC paper section 4.1. ``X = (1, X1)`` with
  ``X1 ~ N(0, 1)``, ``beta_true = (-1, 1)``, N = 100; the paper gives no prior, here
  ``beta ~ N(0, 10^2 I)``.
* ``gaussian_process``: sparse-grid HMC paper section 4.3. Zero-mean GP on inputs in the unit
  square with covariance ``eta exp(-l |x - x'|^2) + J delta``; ``log eta, log l, log J ~ N(-1,
  1)``; the paper does not give the data, here N = 200 uniform inputs and observations drawn
  from the model at ``eta = 1, l = 3, J = 0.1``. Each logp is a Cholesky of an N x N matrix.
"""

from __future__ import annotations

import numpy as np
import pymc as pm


def logistic_regression_data(n_obs: int = 100_000, dim: int = 50, seed: int = 2017):
    """Design matrix, responses and true coefficients of the simulated logistic regression."""
    rng = np.random.default_rng(seed)
    design = np.column_stack([np.full(n_obs, 0.1), rng.normal(0.0, 0.1, size=(n_obs, dim - 1))])
    beta = rng.uniform(0.0, 1.0, size=dim)
    probabilities = 1.0 / (1.0 + np.exp(-(design @ beta)))
    responses = (rng.uniform(size=n_obs) < probabilities).astype("int64")
    return design, responses, beta


def logistic_regression(n_obs: int = 100_000, dim: int = 50, seed: int = 2017) -> pm.Model:
    """The RNS-HMC paper's simulated logistic regression as a PyMC model."""
    design, responses, _ = logistic_regression_data(n_obs, dim, seed)
    with pm.Model() as model:
        x = pm.Data("X", design)
        beta = pm.Normal("beta", 0.0, 10.0, shape=dim)
        pm.Bernoulli("y", logit_p=x @ beta, observed=responses)
    return model


def banana_data(n_obs: int = 100, seed: int = 2015) -> np.ndarray:
    """Observations of the banana posterior: ``b1 + b2^2 = 1`` plus N(0, 2^2) noise."""
    return 1.0 + 2.0 * np.random.default_rng(seed).normal(size=n_obs)


def banana(n_obs: int = 100, seed: int = 2015) -> pm.Model:
    """The sparse-grid HMC paper's banana-shaped posterior as a PyMC model."""
    data = banana_data(n_obs, seed)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        pm.Normal("y", b[0] + b[1] ** 2, 2.0, observed=data)
    return model


def small_logistic_regression(n_obs: int = 100, seed: int = 2016) -> pm.Model:
    """The sparse-grid HMC paper's two-parameter logistic regression as a PyMC model."""
    rng = np.random.default_rng(seed)
    design = np.column_stack([np.ones(n_obs), rng.normal(size=n_obs)])
    probabilities = 1.0 / (1.0 + np.exp(-(design @ np.array([-1.0, 1.0]))))
    responses = (rng.uniform(size=n_obs) < probabilities).astype("int64")
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 10.0, shape=2)
        pm.Bernoulli("y", logit_p=pm.math.dot(design, beta), observed=responses)
    return model


def gaussian_process(n_obs: int = 200, seed: int = 2018) -> pm.Model:
    """The sparse-grid HMC paper's Gaussian-process hyperparameter posterior as a PyMC model."""
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(size=(n_obs, 2))
    squared = np.sum((inputs[:, None, :] - inputs[None, :, :]) ** 2, axis=-1)
    covariance = 1.0 * np.exp(-3.0 * squared) + 0.1 * np.eye(n_obs)
    observed = np.linalg.cholesky(covariance) @ rng.normal(size=n_obs)
    with pm.Model() as model:
        log_eta = pm.Normal("log_eta", -1.0, 1.0)
        log_l = pm.Normal("log_l", -1.0, 1.0)
        log_j = pm.Normal("log_j", -1.0, 1.0)
        kernel = pm.math.exp(log_eta) * pm.math.exp(-pm.math.exp(log_l) * squared)
        cov = kernel + pm.math.exp(log_j) * np.eye(n_obs)
        pm.MvNormal("y", mu=np.zeros(n_obs), cov=cov, observed=observed)
    return model


WORKLOADS = {
    "logistic_regression": logistic_regression,
    "banana": banana,
    "small_logistic_regression": small_logistic_regression,
    "gaussian_process": gaussian_process,
}

__all__ = [
    "WORKLOADS",
    "banana",
    "banana_data",
    "gaussian_process",
    "logistic_regression",
    "logistic_regression_data",
    "small_logistic_regression",
]
