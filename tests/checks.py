"""Assertions shared by the sampler tests: Monte Carlo standard error scaled moment checks."""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

TUNE_KNOWN = int(pm.__version__.split(".")[0]) >= 6
"""PyMC 6 tells a step its tuning length (``setup_chain``); PyMC 5 does not, so there the
samplers do without what needs it (tuning on the surrogate alone)."""
K_SIGMA = 4.5
"""Tolerance in Monte Carlo standard errors (false-alarm rate about 1e-5 per check)."""


def effective_sample_size(draws: np.ndarray, method: str = "bulk") -> float:
    """ArviZ ESS of a ``(chain, draw)`` array; works with arviz 0.23 and 1.x."""
    dataset = xr.Dataset({"x": (("chain", "draw"), np.asarray(draws, dtype=float))})
    return float(az.ess(dataset, method=method)["x"])


def mean_error_in_mcse(draws: np.ndarray, true_mean: float, reference_mcse: float = 0.0) -> float:
    """``|mean - true_mean|`` in units of ``sd / sqrt(bulk ESS)`` (and the reference's MCSE)."""
    ess = effective_sample_size(draws, "bulk")
    mcse = np.hypot(draws.std(ddof=1) / np.sqrt(ess), reference_mcse)
    return abs(draws.mean() - true_mean) / mcse


def sd_error_in_mcse(draws: np.ndarray, true_sd: float, reference_mcse: float = 0.0) -> float:
    """``|sd - true_sd|`` in units of its MCSE, from the ESS of the squared deviations."""
    squared = (draws - draws.mean()) ** 2
    ess = effective_sample_size(squared, "mean")
    mcse_sd = squared.std(ddof=1) / np.sqrt(ess) / (2.0 * np.sqrt(squared.mean()))
    return abs(np.sqrt(squared.mean()) - true_sd) / np.hypot(mcse_sd, reference_mcse)


def assert_moments(
    draws: np.ndarray,
    mean: float,
    sd: float,
    label: str = "",
    min_ess=200,
    reference_mcse_mean: float = 0.0,
    reference_mcse_sd: float = 0.0,
):
    """Check the mean and sd of ``(chain, draw)`` draws within ``K_SIGMA`` MCSE.

    For references that are themselves Monte Carlo estimates, pass their standard errors;
    they are added in quadrature to the sampler's.
    """
    draws = np.asarray(draws, dtype=float)
    ess = effective_sample_size(draws, "bulk")
    assert ess >= min_ess, f"{label}: bulk ESS {ess:.0f} < {min_ess}; the check would be weak"
    z_mean = mean_error_in_mcse(draws, mean, reference_mcse_mean)
    z_sd = sd_error_in_mcse(draws, sd, reference_mcse_sd)
    assert z_mean < K_SIGMA, f"{label}: mean {draws.mean():.4g} vs {mean:.4g} ({z_mean:.1f} MCSE)"
    assert z_sd < K_SIGMA, f"{label}: sd {draws.std():.4g} vs {sd:.4g} ({z_sd:.1f} MCSE)"


def posterior_draws(idata, name: str) -> np.ndarray:
    """``(chain, draw, ...)`` numpy draws of a variable from InferenceData or DataTree."""
    return np.asarray(idata.posterior[name].values)


def sample_stat(idata, name: str) -> np.ndarray:
    """``(chain, draw)`` numpy values of a sampler stat from InferenceData or DataTree."""
    return np.asarray(idata.sample_stats[name].values)
