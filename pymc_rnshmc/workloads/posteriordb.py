"""posteriordb's reference posteriors as PyMC models, with their data and reference summaries.

Eleven posteriors of posteriordb [1]_ with only continuous parameters, whose reference draws
come from long Stan NUTS runs (10 chains x 1000 draws). Each builder takes the posterior's
``data.json`` as a dict and returns the PyMC model that its README specifies: the same
variable names, shapes, priors and transforms, improper flat priors as ``pm.Flat`` /
``pm.HalfFlat``, derived quantities that the reference stores (``theta`` of eight schools,
``f`` of the Gaussian process) as ``pm.Deterministic``, and every hyper-parameter a float
(PyTensor computes the square of an integer scale such as 36 in int8, which overflows).

The data and summaries are not installed with the package: :func:`load_posterior` reads them
from a folder holding one subfolder per posterior (in the repository,
``tests/data/posteriordb``). :data:`POSTERIORS` maps each posterior name to its builder;
:func:`reference_parameters` maps a trace's variables to the reference's Stan-style names
(``beta[2]`` is ``posterior["beta"][..., 1]``).

References
----------
.. [1] Magnusson, M., Torgander, J., Bürkner, P.-C., Zhang, L., Carpenter, B., & Vehtari, A.
   (2024). posteriordb: Testing, benchmarking and developing Bayesian inference algorithms.
   arXiv:2407.04967. https://github.com/stan-dev/posteriordb (commit ``28f8d3d6e975``;
   BSD 3-Clause licence).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.initial_point import make_initial_point_fn

from pymc_rnshmc.workloads.pharmacokinetics import one_compartment_data, one_compartment_model

__all__ = [
    "POSTERIORS",
    "autoregression",
    "bayesian_linear_regression",
    "diamonds_regression",
    "eight_schools_noncentered",
    "election_regression",
    "garch11",
    "gaussian_mixture",
    "gp_poisson_regression",
    "kilpisjarvi_trend",
    "load_posterior",
    "motorcycle_gp",
    "one_compartment",
    "reference_parameter",
    "reference_parameters",
    "reference_point",
]

Data = Mapping[str, Any]
"""A posterior's ``data.json``, as loaded by :func:`json.loads`."""


def load_posterior(name: str, root: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data and the reference summaries of one posterior.

    Parameters
    ----------
    name : str
        posteriordb posterior name, ``"<data>-<model>"`` (a key of :data:`POSTERIORS`).
    root : str or Path
        Folder with one subfolder per posterior, each holding ``data.json`` and
        ``reference_summary.json``.

    Returns
    -------
    data : dict
        The model's data.
    reference : dict
        The reference summaries: ``names`` (Stan style, 1-based), ``mean``, ``sd``,
        ``mcse_mean``, ``kurtosis`` (non-excess; null when not known), ``ess_bulk``, ...
    """
    folder = Path(root) / name
    data = json.loads((folder / "data.json").read_text())
    reference = json.loads((folder / "reference_summary.json").read_text())
    return data, reference


def _floats(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


# ----------------------------------------------------------------- regressions
def bayesian_linear_regression(data: Data) -> pm.Model:
    """``sblrc-blr``: regression without intercept on five correlated predictors.

    Parameters
    ----------
    data : mapping
        ``X`` (100 rows of 5), ``y`` (100).

    Returns
    -------
    pymc.Model
        ``beta ~ Normal(0, 10)`` (5), ``sigma ~ HalfNormal(10)``, observed ``y``.
    """
    predictors = _floats(data["X"])
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 10.0, shape=predictors.shape[1])
        sigma = pm.HalfNormal("sigma", 10.0)
        pm.Normal("y", predictors @ beta, sigma, observed=_floats(data["y"]))
    return model


def kilpisjarvi_trend(data: Data) -> pm.Model:
    """``kilpisjarvi_mod-kilpisjarvi``: linear trend on uncentred years.

    The years 3952-4013 make the intercept and slope correlate at about -0.99999.

    Parameters
    ----------
    data : mapping
        ``x`` (years), ``y`` (temperatures), prior means and sds ``pmualpha``, ``psalpha``,
        ``pmubeta``, ``psbeta``.

    Returns
    -------
    pymc.Model
        ``alpha``, ``beta`` with normal priors from the data, ``sigma ~ HalfFlat`` (Stan's
        implicit flat prior on (0, inf)), observed ``y``.
    """
    years = _floats(data["x"])
    with pm.Model() as model:
        alpha = pm.Normal("alpha", float(data["pmualpha"]), float(data["psalpha"]))
        beta = pm.Normal("beta", float(data["pmubeta"]), float(data["psbeta"]))
        sigma = pm.HalfFlat("sigma")
        pm.Normal("y", alpha + beta * years, sigma, observed=_floats(data["y"]))
    return model


def election_regression(data: Data) -> pm.Model:
    """``nes2000-nes``: party identification on survey covariates, flat priors.

    Parameters
    ----------
    data : mapping
        476 respondents' ``partyid7``, ``real_ideo``, ``race_adj``, ``age_discrete`` (1-4),
        ``educ1``, ``gender``, ``income``, coded as in the file.

    Returns
    -------
    pymc.Model
        ``beta ~ Flat`` (9: intercept, ideology, race, age 30-44, 45-64, 65+, education,
        gender, income), ``sigma ~ HalfFlat``, observed ``partyid7``.
    """
    age = np.asarray(data["age_discrete"])
    columns = [
        np.ones(age.size),
        _floats(data["real_ideo"]),
        _floats(data["race_adj"]),
        *(_floats(age == group) for group in (2, 3, 4)),
        _floats(data["educ1"]),
        _floats(data["gender"]),
        _floats(data["income"]),
    ]
    design = np.column_stack(columns)
    with pm.Model() as model:
        beta = pm.Flat("beta", shape=design.shape[1])
        sigma = pm.HalfFlat("sigma")
        pm.Normal("partyid7", design @ beta, sigma, observed=_floats(data["partyid7"]))
    return model


def diamonds_regression(data: Data) -> pm.Model:
    """``diamonds-diamonds``: log price on 24 centred predictors (brms style), N = 5000.

    Parameters
    ----------
    data : mapping
        ``X`` (5000 rows of 25, the first column constant), ``Y``.

    Returns
    -------
    pymc.Model
        ``b ~ Normal(0, 1)`` (24) on the centred columns 2-25 of ``X``, ``Intercept ~
        StudentT(3, 8, 10)`` (the centred design's), ``sigma ~ HalfStudentT(3, 10)``, observed
        ``Y``.
    """
    predictors = _floats(data["X"])[:, 1:]
    centred = predictors - predictors.mean(axis=0)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 1.0, shape=centred.shape[1])
        intercept = pm.StudentT("Intercept", nu=3.0, mu=8.0, sigma=10.0)
        sigma = pm.HalfStudentT("sigma", nu=3.0, sigma=10.0)
        pm.Normal("Y", intercept + centred @ b, sigma, observed=_floats(data["Y"]))
    return model


# ----------------------------------------------------------------- time series
def autoregression(data: Data) -> pm.Model:
    """``arK-arK``: AR(K) series; the first K values only enter as lagged predictors.

    Parameters
    ----------
    data : mapping
        ``K`` (5), ``y`` (200).

    Returns
    -------
    pymc.Model
        ``alpha``, ``beta`` (K; ``beta[k]`` multiplies the lag-k value) ``~ Normal(0, 10)``,
        ``sigma ~ HalfCauchy(2.5)``, observed ``y[K:]``.
    """
    series = _floats(data["y"])
    order, length = int(data["K"]), series.size
    # column k - 1 holds the value k steps before each target series[order:]
    lagged = np.column_stack([series[order - k : length - k] for k in range(1, order + 1)])
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=order)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("y", alpha + lagged @ beta, sigma, observed=series[order:])
    return model


def _garch_variance(shock, previous, alpha0, alpha1, beta1):
    """One step of the GARCH(1, 1) variance recursion."""
    return alpha0 + alpha1 * shock + beta1 * previous


def garch11(data: Data) -> pm.Model:
    """``garch-garch11``: GARCH(1, 1) volatility, uniform on ``alpha1 + beta1 < 1``.

    Parameters
    ----------
    data : mapping
        ``y`` (200), ``sigma1`` (the first conditional sd).

    Returns
    -------
    pymc.Model
        ``mu ~ Flat``, ``alpha0 ~ HalfFlat``, ``alpha1 ~ Uniform(0, 1)``, ``beta1 ~
        Uniform(0, 1 - alpha1)`` plus the potential ``flat_beta1 = log(1 - alpha1)``, which
        cancels the uniform's ``1 / (1 - alpha1)``: Stan's density in ``beta1`` is flat, not
        normalised. Observed ``y``, all 200 terms, variances by ``pytensor.scan``.
    """
    returns = _floats(data["y"])
    first_variance = pt.constant([float(data["sigma1"]) ** 2], dtype="float64")
    with pm.Model() as model:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Uniform("alpha1", 0.0, 1.0)
        beta1 = pm.Uniform("beta1", 0.0, 1.0 - alpha1)
        pm.Potential("flat_beta1", pt.log1p(-alpha1))
        # the parameters go in as non-sequences: PyMC replaces them by their values only
        # outside the inner graph
        variances = pytensor.scan(
            _garch_variance,
            sequences=[(returns[:-1] - mu) ** 2],
            outputs_info=[first_variance[0]],
            non_sequences=[alpha0, alpha1, beta1],
            return_updates=False,
        )
        variance = pt.concatenate([first_variance, variances])
        pm.Normal("y", mu, pt.sqrt(variance), observed=returns)
    return model


# ----------------------------------------------------------------- hierarchical and mixtures
def eight_schools_noncentered(data: Data) -> pm.Model:
    """``eight_schools-eight_schools_noncentered``: school effects with standardised offsets.

    Parameters
    ----------
    data : mapping
        ``y`` (8 estimated effects), ``sigma`` (their standard errors).

    Returns
    -------
    pymc.Model
        ``theta_trans ~ Normal(0, 1)`` (8), ``mu ~ Normal(0, 5)``, ``tau ~ HalfCauchy(5)``,
        ``theta = mu + tau * theta_trans`` (deterministic, in the reference), observed ``y``.
    """
    effects, standard_errors = _floats(data["y"]), _floats(data["sigma"])
    with pm.Model() as model:
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=effects.size)
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Deterministic("theta", mu + tau * theta_trans)
        pm.Normal("y", theta, standard_errors, observed=effects)
    return model


def gaussian_mixture(data: Data) -> pm.Model:
    """``low_dim_gauss_mix-low_dim_gauss_mix``: two normal components, ordered means.

    Parameters
    ----------
    data : mapping
        ``y`` (1000).

    Returns
    -------
    pymc.Model
        ``mu ~ Normal(0, 2)`` (2, ordered transform), ``sigma ~ HalfNormal(2)`` (2),
        ``theta ~ Beta(5, 5)`` (the weight of the component with the smaller mean), observed
        ``y ~ NormalMixture``.
    """
    with pm.Model() as model:
        mu = pm.Normal(
            "mu",
            0.0,
            2.0,
            shape=2,
            transform=pm.distributions.transforms.ordered,
            initval=np.array([-1.0, 1.0]),
        )
        sigma = pm.HalfNormal("sigma", 2.0, shape=2)
        theta = pm.Beta("theta", 5.0, 5.0)
        weights = pt.stack([theta, 1.0 - theta])
        pm.NormalMixture("y", w=weights, mu=mu, sigma=sigma, observed=_floats(data["y"]))
    return model


# ----------------------------------------------------------------- Gaussian processes
def gp_poisson_regression(data: Data) -> pm.Model:
    """``gp_pois_regr-gp_pois_regr``: latent squared-exponential GP, Poisson counts.

    Parameters
    ----------
    data : mapping
        ``x`` (11 inputs), ``k`` (11 counts); ``y`` belongs to a sibling posterior and is
        not used.

    Returns
    -------
    pymc.Model
        ``rho ~ Gamma(25, rate 4)``, ``alpha ~ HalfNormal(2)``, ``f_tilde ~ Normal(0, 1)``
        (11), ``f = cholesky(K) @ f_tilde`` (deterministic, in the reference) with
        ``K = alpha^2 exp(-(x_i - x_j)^2 / (2 rho^2)) + 1e-10 I``, observed ``k ~
        Poisson(exp(f))``.
    """
    inputs = _floats(data["x"])
    squared_distances = (inputs[:, None] - inputs[None, :]) ** 2
    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        f_tilde = pm.Normal("f_tilde", 0.0, 1.0, shape=inputs.size)
        covariance = alpha**2 * pt.exp(-squared_distances / (2.0 * rho**2))
        covariance = covariance + 1e-10 * np.eye(inputs.size)
        f = pm.Deterministic("f", pt.linalg.cholesky(covariance) @ f_tilde)
        pm.Poisson("k", pt.exp(f), observed=np.asarray(data["k"], dtype=np.int64))
    return model


def _sqrt_spectral_density(sqrt_eigenvalues: np.ndarray, sd, lengthscale):
    """Square root of a 1-d squared-exponential kernel's spectral density at the frequencies."""
    scale = sd * pt.sqrt(np.sqrt(2.0 * np.pi) * lengthscale)
    return scale * pt.exp(-0.25 * lengthscale**2 * sqrt_eigenvalues**2)


def _approximate_gp(name: str, basis: np.ndarray, sqrt_eigenvalues: np.ndarray):
    """An approximate (basis-function) GP of time with brms's priors; its values at the data."""
    sd = pm.HalfStudentT(f"sdgp_{name}", nu=3.0, sigma=36.0)
    lengthscale = pm.InverseGamma(f"lscale_{name}", alpha=1.124909, beta=0.0177)
    weights = pm.Normal(f"zgp_{name}", 0.0, 1.0, shape=basis.shape[1])
    return basis @ (_sqrt_spectral_density(sqrt_eigenvalues, sd, lengthscale) * weights)


def motorcycle_gp(data: Data) -> pm.Model:
    """``mcycle_gp-accel_gp``: heteroscedastic regression, mean and log sd approximate GPs.

    Parameters
    ----------
    data : mapping
        ``Y`` (133), the basis matrices ``Xgp_1`` (133 x 40), ``Xgp_sigma_1`` (133 x 20) and
        the square roots of the Laplacian eigenvalues ``slambda_1``, ``slambda_sigma_1``.

    Returns
    -------
    pymc.Model
        ``Intercept ~ StudentT(3, -13, 36)``, ``sdgp_1``, ``lscale_1``, ``zgp_1`` (40) for the
        mean; ``Intercept_sigma ~ StudentT(3, 0, 10)``, ``sdgp_sigma_1``, ``lscale_sigma_1``,
        ``zgp_sigma_1`` (20) for the log sd (``sdgp ~ HalfStudentT(3, 36)``, ``lscale ~
        InverseGamma(1.124909, scale 0.0177)``, ``zgp ~ Normal(0, 1)``); observed ``Y``.
        Dimension 66.
    """
    with pm.Model() as model:
        intercept = pm.StudentT("Intercept", nu=3.0, mu=-13.0, sigma=36.0)
        mean = intercept + _approximate_gp(
            "1", _floats(data["Xgp_1"]), _floats(data["slambda_1"])[:, 0]
        )
        intercept_sigma = pm.StudentT("Intercept_sigma", nu=3.0, mu=0.0, sigma=10.0)
        log_sd = intercept_sigma + _approximate_gp(
            "sigma_1", _floats(data["Xgp_sigma_1"]), _floats(data["slambda_sigma_1"])[:, 0]
        )
        pm.Normal("Y", mean, pt.exp(log_sd), observed=_floats(data["Y"]))
    return model


# ----------------------------------------------------------------- the ODE without gradients
def one_compartment(data: Data, method: str = "BDF") -> pm.Model:
    """``one_comp_mm_elim_abs-one_comp_mm_elim_abs``: the pharmacokinetic ODE, no gradient.

    The model is :func:`~pymc_rnshmc.workloads.pharmacokinetics.one_compartment_model`, which
    has these data built in; this checks that ``data`` are they.

    Parameters
    ----------
    data : mapping
        ``t0`` (0), ``D`` (dose), ``V`` (volume), ``times`` and ``C_hat`` (20 each).
    method : {"BDF", "LSODA"}
        The ODE solver: BDF defines the posterior, LSODA solves it about ten times faster.

    Returns
    -------
    pymc.Model
        ``k_a``, ``K_m``, ``V_m``, ``sigma ~ HalfCauchy(1)``, observed ``C_hat``.

    Raises
    ------
    ValueError
        ``data`` are not posteriordb's ``one_comp_mm_elim_abs``.
    """
    built_in = one_compartment_data()
    same = (
        float(data["t0"]) == 0.0
        and float(data["D"]) == built_in.dose
        and float(data["V"]) == built_in.volume
        and np.array_equal(_floats(data["times"]), built_in.times)
        and np.array_equal(_floats(data["C_hat"]), built_in.concentrations)
    )
    if not same:
        raise ValueError(
            "one_compartment builds posteriordb's one_comp_mm_elim_abs with its data built in; "
            "these data differ from them."
        )
    return one_compartment_model(method)


POSTERIORS: dict[str, Callable[[Data], pm.Model]] = {
    "kilpisjarvi_mod-kilpisjarvi": kilpisjarvi_trend,
    "garch-garch11": garch11,
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": one_compartment,
    "low_dim_gauss_mix-low_dim_gauss_mix": gaussian_mixture,
    "sblrc-blr": bayesian_linear_regression,
    "arK-arK": autoregression,
    "eight_schools-eight_schools_noncentered": eight_schools_noncentered,
    "nes2000-nes": election_regression,
    "gp_pois_regr-gp_pois_regr": gp_poisson_regression,
    "diamonds-diamonds": diamonds_regression,
    "mcycle_gp-accel_gp": motorcycle_gp,
}
"""Builder of each posterior, by posteriordb name, in order of dimension (3 to 66)."""


# ----------------------------------------------------------------- reference names
def reference_parameter(values: Mapping[str, Any], name: str) -> np.ndarray:
    """The values of one reference parameter: ``beta[2]`` is ``values["beta"][..., 1]``.

    Parameters
    ----------
    values : mapping
        Variable name to values whose last axis indexes a vector variable: a trace's
        ``posterior`` (``(chain, draw, ...)``) or a dict of one point's values.
    name : str
        Stan-style reference name, 1-based (``sigma``, ``beta[2]``).

    Returns
    -------
    numpy.ndarray
        ``values[variable]`` for a scalar name, else its entry along the last axis.
    """
    variable, _, index = name.partition("[")
    array = np.asarray(values[variable])
    if not index:
        return array
    return array[..., int(index.rstrip("]")) - 1]


def reference_parameters(values: Mapping[str, Any], names: Iterable[str]) -> dict[str, np.ndarray]:
    """:func:`reference_parameter` of every name: ``{"beta[1]": values["beta"][..., 0], ...}``."""
    return {name: reference_parameter(values, name) for name in names}


def _reference_values(rv, shape: tuple[int, ...], means: Mapping[str, float]):
    """The reference means of one free variable, shaped like it; None if not in the reference."""
    if not shape:
        return np.asarray(means[rv.name]) if rv.name in means else None
    names = [f"{rv.name}[{index}]" for index in range(1, int(np.prod(shape)) + 1)]
    if not any(name in means for name in names):
        return None
    return np.reshape([means[name] for name in names], shape)


def reference_point(model: pm.Model, reference: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The model's value variables (transformed) at the reference means.

    Free variables that the reference does not hold (``theta_trans`` of eight schools,
    ``f_tilde`` of the Gaussian process) keep the model's initial value.

    Parameters
    ----------
    model : pymc.Model
        A model of :data:`POSTERIORS`.
    reference : mapping
        Its reference summaries (``names``, ``mean``).

    Returns
    -------
    dict
        Value-variable name (``sigma_log__``, ...) to value: a point for ``model.compile_logp()``.
    """
    means = dict(zip(reference["names"], reference["mean"], strict=True))
    shapes = model.eval_rv_shapes()
    overrides = {}
    for rv in model.free_RVs:
        values = _reference_values(rv, tuple(shapes[rv.name]), means)
        if values is not None:
            overrides[rv] = values
    point_function = make_initial_point_fn(
        model=model, overrides=overrides, jitter_rvs=set(), return_transformed=True
    )
    return point_function(0)
