"""Models whose width is a parameter: two logistic regressions and a multilevel regression.

One has correlated predictors; the other is non-centred, with a parameter per group. The "Wide
models" measurements (d = 20 to 320) need posteriors whose dimension can grow while
their character stays. The regression: every coefficient identified, predictors correlated so that
a diagonal mass matrix is not enough, and a logp that costs a few milliseconds (20 000 rows). The
hierarchical model: one offset per group, groups of unequal size (some well informed, some
barely), and the group scale multiplying every offset, so that the offsets and the scale are
dependent and the posterior is not Gaussian. The multilevel regression: three coefficients per
group, non-centred, on a cheap likelihood (5000 rows), the kind of model with a thousand
parameters or more on which a surrogate cannot pay and NUTS must not be slowed down.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

__all__ = [
    "correlated_logistic_regression",
    "correlated_logistic_regression_data",
    "hierarchical_logistic_regression",
    "hierarchical_logistic_regression_data",
    "multilevel_regression",
]


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


def hierarchical_logistic_regression_data(
    groups: int, n_obs: int = 20_000, n_predictors: int = 4, seed: int = 35
) -> dict[str, np.ndarray]:
    """Rows, their groups and responses for :func:`hierarchical_logistic_regression`.

    Group sizes are proportional to log-normal draws (sd 1), so they range over about two orders
    of magnitude; every group has at least two rows (so ``n_obs >= 2 groups``). True values:
    ``mu = -0.5``, ``sigma = 0.8``, offsets ``N(0, 1)``, ``beta`` normal with sd 0.5.

    Returns
    -------
    dict
        ``design`` ``(n_obs, n_predictors)``, ``group`` ``(n_obs,)`` in ``0 .. groups - 1``,
        ``responses`` ``(n_obs,)`` in {0, 1}, and the true ``mu``, ``sigma``, ``offsets``
        ``(groups,)``, ``beta``.
    """
    if groups < 1 or n_obs < 2 * groups:
        raise ValueError(
            f"{groups} groups of at least two rows need n_obs >= {2 * groups}; got {n_obs}."
        )
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 1.0, size=groups)
    extra = rng.multinomial(n_obs - 2 * groups, weights / weights.sum())
    group = np.repeat(np.arange(groups), extra + 2)
    design = rng.normal(size=(n_obs, n_predictors))
    mu, sigma = -0.5, 0.8
    offsets = rng.normal(size=groups)
    beta = rng.normal(0.0, 0.5, size=n_predictors)
    logits = mu + sigma * offsets[group] + design @ beta
    responses = (rng.uniform(size=n_obs) < 1.0 / (1.0 + np.exp(-logits))).astype("int64")
    return {
        "design": design,
        "group": group,
        "responses": responses,
        "mu": np.array(mu),
        "sigma": np.array(sigma),
        "offsets": offsets,
        "beta": beta,
    }


def hierarchical_logistic_regression(
    groups: int, n_obs: int = 20_000, n_predictors: int = 4, seed: int = 35
) -> pm.Model:
    """A non-centred hierarchical logistic regression: ``groups + n_predictors + 2`` parameters.

    ``mu ~ N(0, 2)``, ``sigma ~ HalfNormal(1)``, ``z_g ~ N(0, 1)`` (the data's ``offsets``),
    ``beta ~ N(0, 1)``, and ``y_i ~ Bernoulli(logit^-1(mu + sigma z_{g(i)} + x_i . beta))``; data
    from :func:`hierarchical_logistic_regression_data`. Dims ``group`` and ``predictor``.
    """
    data = hierarchical_logistic_regression_data(groups, n_obs, n_predictors, seed)
    coords = {"group": np.arange(groups), "predictor": np.arange(n_predictors)}
    with pm.Model(coords=coords) as model:
        design = pm.Data("X", data["design"])
        mu = pm.Normal("mu", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        beta = pm.Normal("beta", 0.0, 1.0, dims="predictor")
        logits = mu + sigma * z[data["group"]] + design @ beta
        pm.Bernoulli("y", logit_p=logits, observed=data["responses"])
    return model


def multilevel_regression(groups: int, n_obs: int = 5000, seed: int = 0) -> pm.Model:
    """A non-centred normal regression with a varying intercept and two varying slopes.

    ``3 groups + 7`` parameters: ``mu ~ N(0, 2)`` and ``tau ~ HalfNormal(1)`` (three each),
    ``z_g ~ N(0, I_3)``, ``b_g = mu + tau z_g``, ``sigma ~ HalfNormal(1)``, and
    ``y_i ~ N(b_{g(i),0} + x_i . b_{g(i),1:}, sigma)`` with ``x_i ~ N(0, I_2)``; groups drawn
    uniformly, so sizes vary around ``n_obs / groups``. Data simulated from the model with
    ``mu = (1, 0.5, -0.3)``, ``tau = (0.5, 0.3, 0.2)``, ``sigma = 0.8``.
    """
    rng = np.random.default_rng(seed)
    group = rng.integers(groups, size=n_obs)
    predictors = rng.normal(size=(n_obs, 2))
    truth = np.array([1.0, 0.5, -0.3]) + np.array([0.5, 0.3, 0.2]) * rng.normal(size=(groups, 3))
    responses = truth[group, 0] + np.sum(predictors * truth[group, 1:], axis=1)
    responses = responses + 0.8 * rng.normal(size=n_obs)
    with pm.Model(coords={"group": np.arange(groups), "coefficient": np.arange(3)}) as model:
        mu = pm.Normal("mu", 0.0, 2.0, dims="coefficient")
        tau = pm.HalfNormal("tau", 1.0, dims="coefficient")
        z = pm.Normal("z", 0.0, 1.0, dims=("group", "coefficient"))
        coefficients = mu + tau * z
        sigma = pm.HalfNormal("sigma", 1.0)
        mean = coefficients[group, 0] + pm.math.sum(predictors * coefficients[group, 1:], axis=1)
        pm.Normal("y", mean, sigma, observed=responses)
    return model
