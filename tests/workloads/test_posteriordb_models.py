"""posteriordb's posteriors as PyMC models: shapes, names, log densities and PyMC's NUTS.

The fast tests build every model and evaluate it at the reference means; the slow ones sample
the cheap posteriors (the collection README's "CI" column) with PyMC's own NUTS and compare the
means with the reference's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from pymc_rnshmc.workloads.posteriordb import (
    POSTERIORS,
    load_posterior,
    reference_parameter,
    reference_parameters,
    reference_point,
)
from tests.checks import effective_sample_size, mean_error_in_mcse

POSTERIORDB = Path(__file__).resolve().parents[1] / "data" / "posteriordb"
DIMENSIONS = {
    "kilpisjarvi_mod-kilpisjarvi": 3,
    "garch-garch11": 4,
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": 4,
    "low_dim_gauss_mix-low_dim_gauss_mix": 5,
    "sblrc-blr": 6,
    "arK-arK": 7,
    "eight_schools-eight_schools_noncentered": 10,
    "nes2000-nes": 10,
    "gp_pois_regr-gp_pois_regr": 13,
    "diamonds-diamonds": 26,
    "mcycle_gp-accel_gp": 66,
}
"""Sampled (unconstrained) parameters of each posterior, from the collection's README."""


def test_every_posterior_has_a_builder_and_its_data():
    assert set(POSTERIORS) == set(DIMENSIONS)
    folders = {path.parent.name for path in POSTERIORDB.glob("*/reference_summary.json")}
    assert folders == set(POSTERIORS)


def unobserved_values(model: pm.Model, point: dict) -> dict[str, np.ndarray]:
    """Every free and deterministic variable at ``point``, on the constrained scale."""
    outputs = model.unobserved_value_vars
    function = model.compile_fn(outputs, inputs=model.value_vars, on_unused_input="ignore")
    return dict(zip([output.name for output in outputs], function(point), strict=True))


@pytest.fixture(scope="module", params=list(POSTERIORS))
def built(request):
    name = request.param
    data, reference = load_posterior(name, POSTERIORDB)
    model = POSTERIORS[name](data)
    return name, model, reference


def test_the_model_has_the_reference_parameters(built):
    name, model, reference = built
    point = reference_point(model, reference)
    values = unobserved_values(model, point)
    names = reference["names"]
    mapped = reference_parameters(values, names)
    assert all(np.shape(value) == () for value in mapped.values())
    variables = {reference_name.partition("[")[0] for reference_name in names}
    assert sum(np.size(values[variable]) for variable in variables) == len(names)
    assert sum(np.size(value) for value in point.values()) == DIMENSIONS[name]
    # the reference means went in and come back out under their names
    free = {rv.name for rv in model.free_RVs}
    for index, reference_name in enumerate(names):
        if reference_name.partition("[")[0] in free:
            expected = reference["mean"][index]
            assert mapped[reference_name] == pytest.approx(expected, rel=1e-10), reference_name


def test_the_logp_is_finite_at_the_reference_means(built):
    _, model, reference = built
    logp = model.compile_logp()(reference_point(model, reference))
    assert np.isfinite(logp)


def test_reference_names_are_one_based():
    values = {"beta": np.arange(6.0).reshape(2, 3), "sigma": np.array([7.0, 8.0])}
    np.testing.assert_array_equal(reference_parameter(values, "beta[1]"), [0.0, 3.0])
    np.testing.assert_array_equal(reference_parameter(values, "beta[3]"), [2.0, 5.0])
    np.testing.assert_array_equal(reference_parameter(values, "sigma"), [7.0, 8.0])


def garch_log_density(data: dict, mu, alpha0, alpha1, beta1) -> float:
    """Stan's garch11 density (flat priors) plus the Jacobians of PyMC's transforms."""
    y = np.asarray(data["y"], dtype=float)
    variance = [float(data["sigma1"]) ** 2]
    for previous in y[:-1]:
        variance.append(alpha0 + alpha1 * (previous - mu) ** 2 + beta1 * variance[-1])
    log_likelihood = stats.norm(mu, np.sqrt(variance)).logpdf(y).sum()
    upper = 1.0 - alpha1
    jacobians = np.log(alpha0) + np.log(alpha1 * upper) + np.log(beta1 * (upper - beta1) / upper)
    return log_likelihood + jacobians


def test_garch_is_flat_on_the_triangle():
    """The recursion and the ``log(1 - alpha1)`` potential: no ``1 / (1 - alpha1)`` factor."""
    data, _ = load_posterior("garch-garch11", POSTERIORDB)
    model = POSTERIORS["garch-garch11"](data)
    logp = model.compile_logp()
    for mu, alpha0, alpha1, beta1 in [(5.0, 1.5, 0.55, 0.3), (4.9, 0.8, 0.2, 0.7)]:
        point = reference_point(
            model,
            {"names": ["mu", "alpha0", "alpha1", "beta1"], "mean": [mu, alpha0, alpha1, beta1]},
        )
        expected = garch_log_density(data, mu, alpha0, alpha1, beta1)
        assert logp(point) == pytest.approx(expected, rel=1e-9)


def gp_poisson_log_density(data: dict, point: dict) -> float:
    """gp_pois_regr's density in PyMC's coordinates, with scipy and numpy only."""
    rho, alpha = np.exp(point["rho_log__"]), np.exp(point["alpha_log__"])
    x, f_tilde = np.asarray(data["x"], dtype=float), point["f_tilde"]
    covariance = alpha**2 * np.exp(-((x[:, None] - x[None, :]) ** 2) / (2.0 * rho**2))
    f = np.linalg.cholesky(covariance + 1e-10 * np.eye(x.size)) @ f_tilde
    return (
        stats.gamma(25.0, scale=1.0 / 4.0).logpdf(rho)
        + np.log(rho)
        + stats.halfnorm(scale=2.0).logpdf(alpha)
        + np.log(alpha)
        + stats.norm.logpdf(f_tilde).sum()
        + stats.poisson(np.exp(f)).logpmf(data["k"]).sum()
    )


def approximate_gp_log_density(data: dict, point: dict, name: str) -> tuple[float, np.ndarray]:
    """Prior log density (with Jacobians) of one approximate GP, and its values at the data."""
    sd, lengthscale = np.exp(point[f"sdgp_{name}_log__"]), np.exp(point[f"lscale_{name}_log__"])
    weights = point[f"zgp_{name}"]
    frequencies = np.asarray(data[f"slambda_{name}"], dtype=float)[:, 0]
    density = (
        sd**2 * np.sqrt(2.0 * np.pi) * lengthscale * np.exp(-0.5 * (lengthscale * frequencies) ** 2)
    )
    values = np.asarray(data[f"Xgp_{name}"], dtype=float) @ (np.sqrt(density) * weights)
    log_prior = (
        np.log(2.0)
        + stats.t(3.0, 0.0, 36.0).logpdf(sd)
        + np.log(sd)
        + stats.invgamma(1.124909, scale=0.0177).logpdf(lengthscale)
        + np.log(lengthscale)
        + stats.norm.logpdf(weights).sum()
    )
    return log_prior, values


def motorcycle_log_density(data: dict, point: dict) -> float:
    """mcycle_gp-accel_gp's density in PyMC's coordinates, with scipy and numpy only."""
    mean_prior, mean = approximate_gp_log_density(data, point, "1")
    sd_prior, log_sd = approximate_gp_log_density(data, point, "sigma_1")
    mean = mean + point["Intercept"]
    log_sd = log_sd + point["Intercept_sigma"]
    return (
        stats.t(3.0, -13.0, 36.0).logpdf(point["Intercept"])
        + stats.t(3.0, 0.0, 10.0).logpdf(point["Intercept_sigma"])
        + mean_prior
        + sd_prior
        + stats.norm(mean, np.exp(log_sd)).logpdf(data["Y"]).sum()
    )


@pytest.mark.parametrize(
    ("name", "log_density"),
    [
        ("gp_pois_regr-gp_pois_regr", gp_poisson_log_density),
        ("mcycle_gp-accel_gp", motorcycle_log_density),
    ],
)
def test_the_gaussian_process_densities_match_an_independent_one(name, log_density):
    """The two posteriors too expensive for the NUTS check below, against scipy."""
    data, reference = load_posterior(name, POSTERIORDB)
    model = POSTERIORS[name](data)
    point = reference_point(model, reference)
    point |= {key: value + 0.1 for key, value in point.items() if key.startswith(("f_", "zgp"))}
    # rel 1e-8: the GP's covariance (jitter 1e-10) is nearly singular; the log densities
    # through numpy's and PyTensor's Cholesky factors differed by 2e-9 relative
    assert model.compile_logp()(point) == pytest.approx(log_density(data, point), rel=1e-8)


def test_the_motorcycle_priors_are_not_overflowed():
    """``HalfStudentT(nu=3, sigma=36)`` with Python ints squared 36 in int8 (PyTensor 2.38)."""
    data, _ = load_posterior("mcycle_gp-accel_gp", POSTERIORDB)
    model = POSTERIORS["mcycle_gp-accel_gp"](data)
    log_density = pm.logp(model["sdgp_1"], 40.0).eval()
    assert log_density == pytest.approx(np.log(2.0) + stats.t(3.0, 0.0, 36.0).logpdf(40.0))


# ----------------------------------------------------------------- PyMC's NUTS (slow)
NUTS_CASES = {
    # name: (seed, pm.sample options as the collection's README ran them)
    "kilpisjarvi_mod-kilpisjarvi": (4101, {"init": "jitter+adapt_full"}),
    "garch-garch11": (4102, {}),
    "low_dim_gauss_mix-low_dim_gauss_mix": (4103, {}),
    "sblrc-blr": (4104, {}),
    "arK-arK": (4105, {}),
    "eight_schools-eight_schools_noncentered": (4106, {"target_accept": 0.95}),
    "nes2000-nes": (4107, {}),
    "diamonds-diamonds": (4108, {"init": "jitter+adapt_full"}),
}
"""The posteriors the collection's README marks as cheap enough for CI (diamonds: with a dense
metric only; garch: borderline, about 20 CPU-s)."""
K_MEAN = 4.0
"""Tolerance of the mean, in Monte Carlo standard errors of the run and the reference."""


@pytest.mark.slow
@pytest.mark.parametrize("name", list(NUTS_CASES))
@pytest.mark.filterwarnings("ignore:QuadPotentialFullAdapt is an experimental feature")
def test_pymc_nuts_reproduces_the_reference_means(name):
    seed, options = NUTS_CASES[name]
    data, reference = load_posterior(name, POSTERIORDB)
    with POSTERIORS[name](data):
        idata = pm.sample(
            nuts_sampler="pymc",
            tune=1000,
            draws=1000,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **options,
        )
    failures = []
    for index, reference_name in enumerate(reference["names"]):
        draws = reference_parameter(idata.posterior, reference_name)
        ess = effective_sample_size(draws, "bulk")
        z = mean_error_in_mcse(draws, reference["mean"][index], reference["mcse_mean"][index])
        if ess < 200 or z >= K_MEAN:
            failures.append(f"{reference_name}: {z:.1f} MCSE, bulk ESS {ess:.0f}")
    assert not failures, f"{name}: {failures}"
