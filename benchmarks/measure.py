"""Measurements shared by the benchmark scripts: ESS summaries, evaluation costs, sampler runs."""

from __future__ import annotations

import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from benchmarks.convergence import (
    nutpie_chain_timelines,
    nutpie_timeline,
    pymc_chain_timelines,
    pymc_timeline,
)
from pymc_rnshmc.step_methods import SurrogateHMC
from pymc_rnshmc.step_methods.exact_model import ExactModel

RESULTS = Path(__file__).parent / "results"


def run_metadata(**settings) -> dict:
    """Date, machine and PyMC version of a benchmark run, followed by its settings."""
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "pymc": pm.__version__,
        **settings,
    }


def write_results(name: str, results: dict, markdown: str) -> None:
    """``benchmarks/results/<name>.json`` (everything) and ``<name>.md`` (the table)."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1, default=float))
    (RESULTS / f"{name}.md").write_text(markdown)


def ess_summary(posterior) -> dict:
    """Min and median bulk ESS, min tail ESS over every coordinate of every variable."""
    dataset = xr.Dataset({name: posterior[name] for name in posterior.data_vars})
    bulk = np.concatenate([np.ravel(v) for v in az.ess(dataset, method="bulk").to_array().values])
    tail = np.concatenate([np.ravel(v) for v in az.ess(dataset, method="tail").to_array().values])
    return {
        "min_bulk_ess": float(bulk.min()),
        "median_bulk_ess": float(np.median(bulk)),
        "min_tail_ess": float(tail.min()),
    }


def posterior_moments(posterior) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, sds and bulk ESS of every coordinate, flattened in a fixed order."""
    means, sds, ess = [], [], []
    dataset = xr.Dataset({name: posterior[name] for name in posterior.data_vars})
    bulk = az.ess(dataset, method="bulk")
    for name in sorted(posterior.data_vars):
        values = np.asarray(posterior[name].values)
        flat = values.reshape(values.shape[0] * values.shape[1], -1)
        means.append(flat.mean(axis=0))
        sds.append(flat.std(axis=0, ddof=1))
        ess.append(np.ravel(bulk[name].values))
    return np.concatenate(means), np.concatenate(sds), np.concatenate(ess)


def mean_agreement(reference, other) -> float:
    """Largest difference of posterior means, in combined Monte Carlo standard errors."""
    mean_a, sd_a, ess_a = posterior_moments(reference)
    mean_b, sd_b, ess_b = posterior_moments(other)
    mcse = np.sqrt(sd_a**2 / ess_a + sd_b**2 / ess_b)
    return float(np.max(np.abs(mean_a - mean_b) / mcse))


def compare_with_nuts(results: dict, posteriors: dict, reference: str = "PyMC NUTS") -> None:
    """Add each sampler's min bulk ESS/s speed-ups over ``reference`` and its mean agreement.

    ``results`` and ``posteriors`` are keyed by sampler name, ``results`` from :func:`run_pymc`.
    """
    base = results[reference]
    for name, result in results.items():
        if name == reference:
            continue
        result["speedup_draws"] = result["ess_per_second"] / base["ess_per_second"]
        result["speedup_whole_call"] = (
            result["ess_per_second_whole_call"] / base["ess_per_second_whole_call"]
        )
        result["max_mean_difference_mcse"] = mean_agreement(posteriors[reference], posteriors[name])


def evaluation_costs(model, repeats: int = 200) -> dict:
    """Median seconds of one logp-only and one logp-and-gradient call, in the sampler's space."""
    exact = ExactModel(model, model.continuous_value_vars, dtype="float64")
    # A new point every call: a model that caches its last evaluation (the elliptic PDE keeps
    # its factorization) would otherwise be timed on cache hits.
    positions = 0.5 + 1e-3 * np.random.default_rng(0).normal(size=(repeats + 1, exact.size))
    costs = {}
    for name, function in (
        ("logp_seconds", exact.logp),
        ("logp_gradient_seconds", exact.potential_and_gradient),
    ):
        function(positions[-1])
        timings = []
        for position in positions[:-1]:
            start = time.perf_counter()
            function(position)
            timings.append(time.perf_counter() - start)
        costs[name] = float(np.median(timings))
    return costs


def run_pymc(
    model,
    step_factory,
    tune: int,
    draws: int,
    chains: int,
    seed: int,
    profile=False,
    *,
    init: str = "auto",
    cores: int = 1,
    chain_timelines: bool = False,
    time_step_construction: bool = False,
):
    """``pm.sample`` with a PyMC step; times of the whole call and of the draws after tuning.

    ``step_factory=None`` lets ``pm.sample`` build PyMC's NUTS itself, initialised by ``init``
    (``"jitter+adapt_full"``: a dense mass matrix), inside the timed call. With
    ``time_step_construction`` the clock also covers ``step_factory()`` (the step's compilation).
    ``chain_timelines`` makes ``result["timeline"]`` the ``(chains, tune + draws)`` timelines of
    every chain instead of chain 0's.
    """
    with model:
        construction_start = time.perf_counter()
        step = None if step_factory is None else step_factory()
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        idata = pm.sample(
            step=step,
            init=init,
            nuts_sampler="pymc",
            tune=tune,
            draws=draws,
            chains=chains,
            cores=cores,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
        if profiler:
            profiler.disable()
        if time_step_construction:
            start = construction_start
        wall = time.perf_counter() - start
    stats = idata.sample_stats
    warmup = idata.warmup_sample_stats
    timelines = pymc_chain_timelines if chain_timelines else pymc_timeline
    result = {
        "wall_seconds": wall,
        "timeline": timelines(idata, start),
        "sampling_seconds": float(stats["perf_counter_diff"].sum()),
        "tuning_draw_seconds": float(warmup["perf_counter_diff"].sum()),
        "accept": float(
            (stats["accept"] if "accept" in stats else stats["acceptance_rate"]).mean()
        ),
        "mean_n_steps": float(stats["n_steps"].mean()),
        "mean_integration_time": float((stats["n_steps"] * stats["step_size"]).mean()),
        "divergences": int(stats["diverging"].sum()),
    }
    if "n_gradient_evals" in stats:
        result["gradients_per_draw"] = float(stats["n_gradient_evals"].mean())
        result["logps_per_draw"] = float(stats["n_logp_evals"].mean())
    else:
        result["gradients_per_draw"] = result["logps_per_draw"] = result["mean_n_steps"] + 1.0
    result.update(ess_summary(idata.posterior))
    result["ess_per_second"] = result["min_bulk_ess"] / result["sampling_seconds"]
    result["ess_per_second_whole_call"] = result["min_bulk_ess"] / result["wall_seconds"]
    if "estimator_points" in stats:
        result["surrogate_refreshes_after_tuning"] = int(
            stats["surrogate_refreshes"].values[0, -1] - warmup["surrogate_refreshes"].values[0, -1]
        )
        result["estimator_points"] = int(stats["estimator_points"].values[0, -1])
    if isinstance(step, SurrogateHMC) and step.surrogate is not None:
        report = getattr(step.surrogate, "report", None)
        result["surrogate_fit_seconds"] = None if report is None else report.seconds
        result["setup_seconds"] = step.setup_seconds
        result["surrogate_gradient_error"] = getattr(report, "gradient_error", None)
        result["surrogate_weight_scale"] = getattr(report, "weight_scale", None)
        if hasattr(report, "max_potential_error"):  # SparseGridHMC's precomputation
            result["grid"] = report.grid
            result["grid_points"] = report.n_points
            result["grid_level"] = report.level
            result["cells_per_dimension"] = report.cells_per_dimension
            result["grid_domain"] = report.domain
            result["grid_error_estimate"] = report.error_estimate
            result["max_potential_error"] = report.max_potential_error
        best = step.trajectory_choice.best
        result["trajectory"] = {
            "metric": best.metric.kind,
            "path_length": best.path_length,
            "simulated_step_size": best.step_size,
        }
        result["mean_abs_surrogate_error"] = float(np.nanmean(np.abs(stats["surrogate_error"])))
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        result["profile"] = text.getvalue()
    return idata, result


def run_nutpie(
    model,
    tune: int,
    draws: int,
    chains: int,
    seed: int,
    *,
    adaptation: str = "diag",
    cores: int = 1,
    chain_timelines: bool = False,
):
    """nutpie on the same model; its sampling phase is apportioned by gradient evaluations.

    ``adaptation="low_rank"`` is nutpie's low-rank modified mass matrix (nutpie >= 0.16; before,
    ``low_rank_modified_mass_matrix=True``). ``chain_timelines`` makes ``result["timeline"]`` the
    ``(chains, tune + draws)`` timelines of every chain, from the draw counts nutpie's progress
    callback reports every 50 ms (see :func:`~benchmarks.convergence.nutpie_chain_timelines`).
    """
    import nutpie

    observations = []
    options = {} if adaptation == "diag" else {"adaptation": adaptation}
    if chain_timelines:
        options["progress_callback"] = lambda progress: observations.append(
            (time.perf_counter(), [chain.finished_draws for chain in progress])
        )
        options["progress_rate"] = 50
    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compile_seconds = time.perf_counter() - start
    loop_start = time.perf_counter()
    idata = nutpie.sample(
        compiled,
        tune=tune,
        draws=draws,
        chains=chains,
        seed=seed,
        progress_bar=False,
        save_warmup=True,
        cores=cores,
        **options,
    )
    loop_seconds = time.perf_counter() - loop_start
    wall = time.perf_counter() - start
    stats, warmup = idata.sample_stats, idata.warmup_sample_stats
    sampling_steps = float(stats["n_steps"].sum())
    share = sampling_steps / (sampling_steps + float(warmup["n_steps"].sum()))
    if chain_timelines:
        observed = [(moment - start, counts) for moment, counts in observations]
        timeline = nutpie_chain_timelines(idata, compile_seconds, loop_seconds, observed)
    else:
        timeline = nutpie_timeline(idata, compile_seconds, loop_seconds)
    result = {
        "wall_seconds": wall,
        "timeline": timeline,
        "compile_seconds": compile_seconds,
        "sampling_seconds": loop_seconds * share,
        "accept": float(stats["mean_tree_accept"].mean()),
        "mean_n_steps": float(stats["n_steps"].mean()),
        "mean_integration_time": float((stats["n_steps"] * stats["step_size"]).mean()),
        "divergences": int(stats["diverging"].sum()),
        "gradients_per_draw": float(stats["n_steps"].mean()),
        "logps_per_draw": float(stats["n_steps"].mean()),
    }
    result.update(ess_summary(idata.posterior))
    return idata, result
