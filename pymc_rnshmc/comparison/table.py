"""The comparison table of any runs: ESS, ESS per second, evaluations per draw, agreement.

ESS is ArviZ's, per coordinate of every variable (:func:`posterior_coordinates`,
:func:`coordinate_ess`); the table's agreement column is the largest difference of a posterior
mean from the reference run's, in the Monte Carlo standard errors of both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from pymc_rnshmc.comparison.runs import SamplerRun, evaluations

__all__ = [
    "comparison_table",
    "coordinate_ess",
    "error_over_time",
    "posterior_coordinates",
    "posterior_moments",
]


def _variables(posterior) -> dict[str, np.ndarray]:
    """Each variable as ``(chain, draw, coordinates)``, in name order, without ``__`` names."""
    variables = {}
    for name in sorted(str(name) for name in posterior.data_vars):
        if not name.endswith("__"):
            values = np.asarray(posterior[name].values, dtype=float)
            variables[name] = values.reshape(values.shape[0], values.shape[1], -1)
    return variables


def posterior_coordinates(posterior) -> np.ndarray:
    """Every coordinate of every variable of a posterior, as ``(chain, draw, coordinate)``.

    Parameters
    ----------
    posterior : xarray.Dataset or DataTree
        A trace's ``posterior`` group.

    Returns
    -------
    ndarray
        The variables in name order, each raveled; PyMC's transformed copies (names ending in
        ``__``) are left out.
    """
    return np.concatenate(list(_variables(posterior).values()), axis=2)


def coordinate_ess(draws: np.ndarray, method: str = "bulk") -> np.ndarray:
    """ArviZ's ESS of every coordinate of ``(chain, draw, coordinate)`` draws.

    Parameters
    ----------
    draws : ndarray
        ``(chain, draw, coordinate)``, as :func:`posterior_coordinates` gives them.
    method : str
        ArviZ's ``method``: ``"bulk"``, ``"tail"``, ...

    Returns
    -------
    ndarray
        One ESS per coordinate; all 0 if no chain ever moved. ArviZ gives a constant
        coordinate the number of draws as its ESS (0.23 and 1.x alike), which would rate a
        chain stuck at its start, every draw divergent, as a perfect sampler (nutpie with its
        low-rank mass matrix on posteriordb ``mcycle_gp-accel_gp``, seed 1: step size 1e-199,
        1000 divergences, ESS 1000). A coordinate that is constant while others move (a
        correlation matrix's unit diagonal, a constant ``Deterministic``) keeps ArviZ's value,
        which never sets the minimum.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.size and np.all(draws == draws[:, :1]):
        return np.zeros(draws.shape[2])
    dataset = xr.Dataset({"x": (("chain", "draw", "coordinate"), draws)})
    return np.asarray(az.ess(dataset, method=method)["x"].values, dtype=float)


def posterior_moments(trace) -> tuple[np.ndarray, np.ndarray]:
    """Means and sds of every coordinate of a trace's posterior (:func:`posterior_coordinates`)."""
    draws = posterior_coordinates(trace.posterior)
    return draws.mean(axis=(0, 1)), draws.std(axis=(0, 1), ddof=1)


def _stat_mean(stats, *names: str) -> float:
    for name in names:
        if name in stats:
            return float(np.mean(np.asarray(stats[name].values, dtype=float)))
    return np.nan


TARGET_ESS = 1000.0
"""The ESS the ``... to ESS 1000`` columns project to: min bulk and tail ESS of every
coordinate."""


def _to_target_ess(run: SamplerRun, logps: np.ndarray, gradients: np.ndarray, ess: float):
    """Exact evaluations and seconds of the whole call until min bulk and tail ESS reach 1000.

    The tuning's as they were, plus the kept draws' scaled by ``TARGET_ESS / ess`` (ESS grows
    in proportion to the draws): machine-independent, unlike seconds, and NaN where the tuning's
    evaluations or the draws' seconds are not known.
    """
    scale = TARGET_ESS / ess if ess > 0 else np.inf
    tuning_logps, tuning_gradients = run.tuning_evaluations
    seconds = run.whole_call_seconds + run.draw_seconds * (scale - 1.0)
    return (
        tuning_logps + logps.sum() * scale,
        tuning_gradients + gradients.sum() * scale,
        seconds,
    )


@dataclass
class _Summary:
    """A posterior's coordinates: their variables' names, means, MCSEs and ESS."""

    labels: np.ndarray
    mean: np.ndarray
    mcse: np.ndarray
    bulk: np.ndarray
    tail: np.ndarray

    @classmethod
    def of(cls, trace) -> _Summary:
        variables = _variables(trace.posterior)
        draws = np.concatenate(list(variables.values()), axis=2)
        labels = np.repeat(list(variables), [v.shape[2] for v in variables.values()])
        bulk = coordinate_ess(draws, "bulk")
        with np.errstate(divide="ignore", invalid="ignore"):  # a chain that never moved: 0
            mcse = np.where(bulk > 0, draws.std(axis=(0, 1), ddof=1) / np.sqrt(bulk), 0.0)
        return cls(labels, draws.mean(axis=(0, 1)), mcse, bulk, coordinate_ess(draws, "tail"))

    def max_difference(self, reference: _Summary) -> float:
        """Largest ``|mean - reference's|`` in combined MCSEs, over the variables both have."""
        shared = np.intersect1d(self.labels, reference.labels)
        mine, theirs = np.isin(self.labels, shared), np.isin(reference.labels, shared)
        with np.errstate(divide="ignore", invalid="ignore"):
            difference = np.abs(self.mean[mine] - reference.mean[theirs])
            in_mcse = difference / np.hypot(self.mcse[mine], reference.mcse[theirs])
        return float(np.nanmax(in_mcse)) if in_mcse.size else np.nan


def comparison_table(runs: Mapping[str, SamplerRun], reference: str | None = None) -> pd.DataFrame:
    """The table of :func:`compare_samplers` for any runs (see there for its columns).

    Parameters
    ----------
    runs : mapping of str to SamplerRun
        From :func:`run_sampler`, or made by hand (``SamplerRun(name, trace, seconds, np.nan)``
        for a ``pm.sample_smc`` call, say).
    reference : str, optional
        The run the posterior means are compared with; without one ``max |dmean| (MCSE)`` is
        NaN.

    Returns
    -------
    pandas.DataFrame
        One row per run, indexed by name.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, comparison_table, run_sampler
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     step = RNSHMC(exploration_steps=100, weigh_costs=False)
    ...     options = dict(tune=300, draws=200, chains=1, progressbar=False)
    ...     nuts = run_sampler("pymc", **options)
    ...     rnshmc = run_sampler(step, **options)
    >>> table = comparison_table({"NUTS": nuts, "RNSHMC": rnshmc}, reference="NUTS")
    >>> bool(table.loc["RNSHMC", "grad evals/draw"] < table.loc["NUTS", "grad evals/draw"])
    True
    >>> float(table.loc["NUTS", "max |dmean| (MCSE)"])
    0.0
    """
    summaries = {name: _Summary.of(run.trace) for name, run in runs.items()}
    rows = {}
    for name, run in runs.items():
        summary, stats = summaries[name], run.trace.sample_stats
        bulk, tail = summary.bulk.min(), summary.tail.min()
        logps, gradients = evaluations(stats, run.backend)
        logps_to, gradients_to, seconds_to = _to_target_ess(run, logps, gradients, min(bulk, tail))
        if reference is None:
            difference = np.nan
        elif name == reference:
            difference = 0.0
        else:
            difference = summary.max_difference(summaries[reference])
        rows[name] = {
            "whole call s": run.whole_call_seconds,
            "draws s": run.draw_seconds,
            "min bulk ESS": bulk,
            "median bulk ESS": float(np.median(summary.bulk)),
            "min tail ESS": tail,
            "median tail ESS": float(np.median(summary.tail)),
            "bulk ESS/s (draws)": bulk / run.draw_seconds,
            "tail ESS/s (draws)": tail / run.draw_seconds,
            "bulk ESS/s (call)": bulk / run.whole_call_seconds,
            "tail ESS/s (call)": tail / run.whole_call_seconds,
            "logp evals/draw": float(logps.mean()),
            "grad evals/draw": float(gradients.mean()),
            "logps to ESS 1000": logps_to,
            "gradients to ESS 1000": gradients_to,
            "s to ESS 1000": seconds_to,
            "accept": _stat_mean(stats, "accept", "acceptance_rate", "mean_tree_accept"),
            "divergences": int(np.sum(np.asarray(stats["diverging"].values)))
            if "diverging" in stats
            else 0,
            "max |dmean| (MCSE)": difference,
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "sampler"
    return table


def error_over_time(
    run: SamplerRun, mean: np.ndarray, sd: np.ndarray, points: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Largest ``|mean of the draws done by t - mean| / sd`` at up to ``points`` times ``t``."""
    draws = posterior_coordinates(run.trace.posterior)
    with np.errstate(divide="ignore", invalid="ignore"):
        if run.finish_seconds is None:
            final = np.nanmax(np.abs(draws.mean(axis=(0, 1)) - mean) / sd)
            return np.array([run.whole_call_seconds]), np.array([final])
        order = np.argsort(run.finish_seconds, axis=None)
        times = run.finish_seconds.reshape(-1)[order]
        pooled = draws.reshape(-1, draws.shape[2])[order]
        running = np.cumsum(pooled, axis=0) / np.arange(1, len(pooled) + 1)[:, None]
        chosen = np.unique(np.geomspace(1, len(pooled), points).astype(int) - 1)
        errors = np.nanmax(np.abs(running[chosen] - mean) / sd, axis=1)
    return times[chosen], errors
