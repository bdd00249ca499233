"""What the benchmark scripts share: sampler runs, their result records, costs and result files.

The measurements (ESS, ESS per second, exact evaluations per draw, acceptance, divergences, the
difference of posterior means in MCSE) are :mod:`pymc_rnshmc.comparison`'s: :func:`run` samples
through :func:`~pymc_rnshmc.comparison.run_sampler` and :func:`measurements` renames the columns
of :func:`~pymc_rnshmc.comparison.comparison_table` to the result files' keys. This module adds
only what the benchmarks record besides: the cost of one model evaluation, the draws' timelines,
the tuning draws' seconds, leapfrog steps and path lengths, the surrogate's fit, grid and
trajectories, profiles, and the result files.
"""

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

import numpy as np
import pymc as pm

from benchmarks.convergence import (
    nutpie_chain_timelines,
    nutpie_timeline,
    pymc_chain_timelines,
    pymc_timeline,
)
from pymc_rnshmc.comparison import SamplerRun, comparison_table, run_sampler
from pymc_rnshmc.step_methods import SurrogateHMC
from pymc_rnshmc.step_methods.exact_model import ExactModel

RESULTS = Path(__file__).parent / "results"
MEASURED = {
    "whole call s": "wall_seconds",
    "draws s": "sampling_seconds",
    "min bulk ESS": "min_bulk_ess",
    "median bulk ESS": "median_bulk_ess",
    "min tail ESS": "min_tail_ess",
    "bulk ESS/s (draws)": "ess_per_second",
    "bulk ESS/s (call)": "ess_per_second_whole_call",
    "logp evals/draw": "logps_per_draw",
    "grad evals/draw": "gradients_per_draw",
    "logps to ESS 1000": "logps_to_ess_1000",
    "gradients to ESS 1000": "gradients_to_ess_1000",
    "s to ESS 1000": "seconds_to_ess_1000",
    "accept": "accept",
    "divergences": "divergences",
    "max |dmean| (MCSE)": "max_mean_difference_mcse",
}
"""The columns of :func:`~pymc_rnshmc.comparison.comparison_table` the result files keep, and
their keys there."""


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


def cell(value) -> str:
    """A result table's cell: floats to three significant digits, ``None`` as a dash."""
    if isinstance(value, float):
        return f"{value:.3g}"
    return "-" if value is None else str(value)


def markdown_table(rows: list[dict], columns: tuple[str, ...]) -> list[str]:
    """The lines of a markdown table of ``rows`` (dicts) in ``columns`` (``|`` escaped there)."""
    header = (column.replace("|", "\\|") for column in columns)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]


def measurements(runs: dict[str, SamplerRun], reference: str | None = None) -> dict[str, dict]:
    """Each run's row of the package's comparison table, under the result files' keys.

    ``max_mean_difference_mcse`` (the largest difference of a posterior mean from
    ``reference``'s, in combined MCSEs, over the variables both report) is left out for the
    reference and without one, as is any other measurement a run lacks (NaN).
    """
    table = comparison_table(runs, reference)
    results = {}
    for name in table.index:
        values = {key: _plain(table.at[name, column]) for column, key in MEASURED.items()}
        if name == reference:
            del values["max_mean_difference_mcse"]
        results[name] = {
            key: value
            for key, value in values.items()
            if not (isinstance(value, float) and np.isnan(value))
        }
    return results


def _plain(value):
    """A numpy scalar as the Python number it holds (JSON writes ``int`` as an integer)."""
    return value.item() if isinstance(value, np.generic) else value


def compare_with_nuts(results: dict, runs: dict, reference: str = "PyMC NUTS") -> None:
    """Add each run's min bulk ESS/s speed-ups over ``reference`` and its mean difference.

    ``results`` (from :func:`run`) and ``runs`` are keyed by sampler name.
    """
    base = results[reference]
    agreement = measurements(runs, reference)
    for name, result in results.items():
        if name == reference:
            continue
        result["speedup_draws"] = result["ess_per_second"] / base["ess_per_second"]
        result["speedup_whole_call"] = (
            result["ess_per_second_whole_call"] / base["ess_per_second_whole_call"]
        )
        result["max_mean_difference_mcse"] = agreement[name]["max_mean_difference_mcse"]


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


def run(
    model,
    name: str,
    sampler,
    *,
    tune: int,
    draws: int,
    chains: int,
    seed: int,
    cores: int = 1,
    profile: bool = False,
    chain_timelines: bool = False,
    **sample_kwargs,
) -> tuple[SamplerRun, dict]:
    """One sampler's call with its tuning draws kept, and its result record.

    ``sampler`` and ``sample_kwargs`` are :func:`~pymc_rnshmc.comparison.run_sampler`'s: a step
    class, instance or callable, ``"pymc"`` (``pm.sample``'s NUTS; ``init="jitter+adapt_full"``
    for a dense mass matrix) or ``"nutpie"`` (``adaptation="low_rank"``). The clock starts
    before a step class or callable builds the step. The record has :func:`measurements`,
    :func:`details` and ``timeline``: seconds since the call started at which each draw
    (tuning, then sampling) of chain 0 was done or, with ``chain_timelines``, ``(chains, tune +
    draws)`` of every chain (nutpie's from the draw counts its progress callback reports every
    50 ms, see :func:`~benchmarks.convergence.nutpie_chain_timelines`). ``profile`` adds the
    call's cProfile (15 lines by own time) as ``profile``.
    """
    observations = []
    if isinstance(sampler, str) and sampler == "nutpie" and chain_timelines:
        sample_kwargs["progress_callback"] = lambda progress: observations.append(
            (time.perf_counter(), [chain.finished_draws for chain in progress])
        )
        sample_kwargs["progress_rate"] = 50
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    sampled = run_sampler(
        sampler,
        model,
        name=name,
        tune=tune,
        draws=draws,
        chains=chains,
        cores=cores,
        random_seed=seed,
        progressbar=False,
        discard_tuned_samples=False,
        **sample_kwargs,
    )
    if profiler:
        profiler.disable()
    result = measurements({name: sampled})[name] | details(sampled)
    result["timeline"] = timeline(sampled, observations, chain_timelines)
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        result["profile"] = text.getvalue()
    return sampled, result


def timeline(sampled: SamplerRun, observations: list, chain_timelines: bool) -> np.ndarray:
    """Seconds since the call started at which each draw was done (see :func:`run`)."""
    if sampled.backend == "nutpie":
        loop_seconds = sampled.whole_call_seconds - sampled.compile_seconds
        if not chain_timelines:
            return nutpie_timeline(sampled.trace, sampled.compile_seconds, loop_seconds)
        observed = [(moment - sampled.started, counts) for moment, counts in observations]
        return nutpie_chain_timelines(
            sampled.trace, sampled.compile_seconds, loop_seconds, observed
        )
    timelines = pymc_chain_timelines if chain_timelines else pymc_timeline
    return timelines(sampled.trace, sampled.started)


def details(sampled: SamplerRun) -> dict:
    """What the benchmarks record of a run besides its measurements.

    The tuning draws' seconds (PyMC) or the compile's (nutpie); mean leapfrog steps and path
    length after tuning; ARNSHMC's estimator; and a surrogate step's fit, grid and trajectories.
    """
    stats, step = sampled.trace.sample_stats, sampled.step
    warmup = sampled.trace.warmup_sample_stats
    result = {}
    if sampled.backend == "nutpie":
        result["compile_seconds"] = sampled.compile_seconds
    elif "perf_counter_diff" in warmup:
        result["tuning_draw_seconds"] = float(warmup["perf_counter_diff"].sum())
    if "n_steps" in stats:
        result["mean_n_steps"] = float(stats["n_steps"].mean())
        result["mean_integration_time"] = float((stats["n_steps"] * stats["step_size"]).mean())
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
    return result
