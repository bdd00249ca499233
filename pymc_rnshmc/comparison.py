"""One call that samples a model with PyMC's NUTS (and nutpie) and surrogate samplers, and compares.

:func:`compare_samplers` runs every sampler on the same model with the same tuning, draws,
chains and seed, timing each whole ``pm.sample`` call, and returns a :class:`SamplerComparison`:
a tidy table (ESS from ArviZ, per second of the draws and of the whole call; exact evaluations
per draw; acceptance; divergences; how far each posterior mean is from the reference's, in Monte
Carlo standard errors) and two figures (ESS per second; relative error of the posterior means
against wall time). It is the comparison the benchmark scripts and the README's first command
make, so users need not copy it out of ``benchmarks/``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from pymc_rnshmc.step_methods.exact_model import has_gradient

__all__ = ["SamplerComparison", "SamplerRun", "compare_samplers"]

_log = logging.getLogger("pymc.rnshmc")

NUTS_NAME = "PyMC NUTS"
NUTPIE_NAME = "nutpie"


@dataclass
class SamplerRun:
    """One sampler's result.

    Attributes
    ----------
    name : str
    trace : InferenceData or DataTree
        What ``pm.sample`` returned.
    whole_call_seconds : float
        Wall time of the whole call (tuning, fits, setup and draws).
    draw_seconds : float
        Wall time of the draws after tuning, from the step's own timers (NaN without them).
    finish_seconds : ndarray or None
        ``(chain, draw)`` seconds since the call started at which each kept draw was done
        (``None`` without per-draw timers).
    """

    name: str
    trace: Any
    whole_call_seconds: float
    draw_seconds: float
    finish_seconds: np.ndarray | None = None


@dataclass
class SamplerComparison:
    """The runs of :func:`compare_samplers`, their table and their figures.

    Attributes
    ----------
    runs : dict of str to SamplerRun
    reference : str
        The run the posterior means are compared with.
    skipped : dict of str to str
        Samplers that could not run, and why.
    table : pandas.DataFrame
        One row per run (see :func:`compare_samplers`).
    """

    runs: dict[str, SamplerRun]
    reference: str
    skipped: dict[str, str] = field(default_factory=dict)
    table: pd.DataFrame = field(init=False)

    def __post_init__(self) -> None:
        self.table = comparison_table(self.runs, self.reference)

    def __str__(self) -> str:
        lines = [self.table.to_string(float_format=lambda value: f"{value:.4g}")]
        lines += [f"{name}: not run ({why})" for name, why in self.skipped.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self.table.to_html(float_format=lambda value: f"{value:.4g}")

    def plot_ess(self, ax=None):
        """Bars of min bulk and tail ESS per second of the whole call and of the draws."""
        plt = _pyplot()
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(self.table)))
        columns = [
            "bulk ESS/s (call)",
            "tail ESS/s (call)",
            "bulk ESS/s (draws)",
            "tail ESS/s (draws)",
        ]
        positions = np.arange(len(self.table))
        height = 0.8 / len(columns)
        for offset, column in enumerate(columns):
            ax.barh(positions + offset * height, self.table[column], height, label=column)
        ax.set_yticks(positions + 0.4 - height / 2, self.table.index)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("min ESS per second")
        ax.legend(fontsize="small")
        return ax

    def plot_error_vs_time(self, ax=None):
        """Largest relative error of the posterior means against wall time of the call.

        At each time, the means of every draw done by then (all chains), against the
        reference's final means, in units of the reference's posterior sds. A run without
        per-draw timers (nutpie) is one point at the end of its call.
        """
        plt = _pyplot()
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        mean, sd = _moments(self.runs[self.reference].trace)
        for name, run in self.runs.items():
            times, errors = error_over_time(run, mean, sd)
            style = "-" if len(times) > 1 else "o"
            ax.plot(times, errors, style, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("seconds since the call started")
        ax.set_ylabel("max |mean - reference| / sd")
        ax.legend(fontsize="small")
        return ax


def compare_samplers(
    model: pm.Model | None = None,
    samplers: Mapping[str, Any] | Sequence[Any] | None = None,
    *,
    tune: int = 1000,
    draws: int = 1000,
    chains: int = 2,
    cores: int = 1,
    random_seed: int = 1,
    nuts: bool = True,
    nutpie: bool | None = None,
    progressbar: bool = True,
    reference: str | None = None,
) -> SamplerComparison:
    """Sample ``model`` with PyMC's NUTS, nutpie and the given samplers, and compare them.

    Every sampler runs with the same ``tune``, ``draws``, ``chains``, ``cores`` and
    ``random_seed``, one after another, each whole ``pm.sample`` call timed.

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model of the enclosing ``with`` block.
    samplers : mapping or sequence, optional
        Step methods to compare: a step class (``RNSHMC``), a step instance, or a callable
        that returns a step, built inside the model's context. A mapping gives their names,
        a sequence names them after their class. Default ``{"RNSHMC": RNSHMC}``.
    tune, draws, chains, cores, random_seed
        Passed to every ``pm.sample`` call.
    nuts : bool
        Include PyMC's own NUTS (``nuts_sampler="pymc"``), with its default initialisation.
    nutpie : bool, optional
        Include nutpie; default when it is installed. Neither NUTS runs on a model whose
        logp has no gradient: they are skipped and say so.
    progressbar : bool
        PyMC's progress bar for each run.
    reference : str, optional
        The run whose posterior means the others are compared with; default PyMC's NUTS if it
        ran, else the first run.

    Returns
    -------
    SamplerComparison
        Its ``table`` has, per run: ``whole call s``, ``draws s`` (the draws after tuning,
        from the step's timers; NaN for nutpie), min and median bulk ESS and min and median
        tail ESS over every coordinate (ArviZ), bulk and tail ESS per second of the draws and
        of the whole call, ``logp evals/draw`` and ``grad evals/draw`` (exact evaluations; for
        NUTS one joint evaluation per leapfrog step), ``accept``, ``divergences``, and
        ``max |dmean| (MCSE)``: the largest difference of a posterior mean from the
        reference's, in Monte Carlo standard errors of both.

    Examples
    --------
    >>> from pymc_rnshmc import RNSHMC, compare_samplers
    >>> with model:  # doctest: +SKIP
    ...     comparison = compare_samplers(samplers=[RNSHMC], tune=1000, draws=1000)
    >>> print(comparison)  # doctest: +SKIP
    >>> comparison.plot_ess()  # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    factories = _named_factories(samplers)
    skipped: dict[str, str] = {}
    baselines = _baselines(model, nuts, nutpie, skipped)
    options = {
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "cores": cores,
        "random_seed": random_seed,
        "progressbar": progressbar,
    }
    every = {**baselines, **factories}
    if not every:
        raise ValueError("compare_samplers has nothing to run: give samplers or nuts=True.")
    if reference is None:
        reference = NUTS_NAME if NUTS_NAME in every else next(iter(every))
    if reference not in every:
        raise ValueError(f"reference {reference!r} is not among the runs {list(every)}.")
    runs: dict[str, SamplerRun] = {}
    for position, (name, run) in enumerate(every.items(), start=1):
        _log.info("compare_samplers: %s (%d of %d)", name, position, len(every))
        runs[name] = run(name, model, options)
    return SamplerComparison(runs, reference, skipped)


# ----------------------------------------------------------------- running
def _named_factories(samplers) -> dict[str, Callable]:
    if samplers is None:
        from pymc_rnshmc.step_methods import RNSHMC

        samplers = {"RNSHMC": RNSHMC}
    if isinstance(samplers, Mapping):
        items = list(samplers.items())
    elif isinstance(samplers, Sequence) and not isinstance(samplers, str):
        items = [(_sampler_name(sampler), sampler) for sampler in samplers]
    else:
        raise TypeError(
            "samplers must be a mapping of names to step methods or a sequence of them; got "
            f"{samplers!r}."
        )
    factories, seen = {}, {}
    for name, sampler in items:
        if not (isinstance(sampler, type) or callable(sampler) or hasattr(sampler, "step")):
            raise TypeError(
                f"{name!r}: a sampler must be a step class, a step instance or a callable that "
                f"returns a step; got {sampler!r}."
            )
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name} ({seen[name]})"
        factories[label] = _step_runner(sampler)
    return factories


def _sampler_name(sampler) -> str:
    if isinstance(sampler, type):
        return sampler.__name__
    if hasattr(sampler, "step"):
        return type(sampler).__name__
    return getattr(sampler, "__name__", type(sampler).__name__)


def _step_runner(sampler) -> Callable:
    def run(name: str, model: pm.Model, options: dict) -> SamplerRun:
        with model:
            start = time.perf_counter()
            step = (
                sampler() if isinstance(sampler, type) or not hasattr(sampler, "step") else sampler
            )
            trace = pm.sample(step=step, compute_convergence_checks=False, **options)
            wall = time.perf_counter() - start
        return _pymc_run(name, trace, wall, start)

    return run


def _baselines(model, nuts: bool, nutpie: bool | None, skipped: dict) -> dict[str, Callable]:
    baselines: dict[str, Callable] = {}
    wanted = {NUTS_NAME: nuts, NUTPIE_NAME: nutpie}
    if nutpie is None:
        wanted[NUTPIE_NAME] = _nutpie_installed()
    if not any(wanted.values()):
        return baselines
    if not has_gradient(model, model.value_vars):
        for name, want in wanted.items():
            if want:
                skipped[name] = "the model's logp has no gradient"
        return baselines
    if wanted[NUTS_NAME]:
        baselines[NUTS_NAME] = _nuts_runner("pymc")
    if wanted[NUTPIE_NAME]:
        if _nutpie_installed():
            baselines[NUTPIE_NAME] = _nuts_runner("nutpie")
        else:
            skipped[NUTPIE_NAME] = "not installed (pip install nutpie)"
    return baselines


def _nutpie_installed() -> bool:
    try:
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def _nuts_runner(backend: str) -> Callable:
    def run(name: str, model: pm.Model, options: dict) -> SamplerRun:
        with model:
            start = time.perf_counter()
            trace = pm.sample(nuts_sampler=backend, compute_convergence_checks=False, **options)
            wall = time.perf_counter() - start
        if backend == "pymc":
            return _pymc_run(name, trace, wall, start)
        return SamplerRun(name, trace, wall, np.nan)

    return run


def _pymc_run(name: str, trace, wall: float, start: float) -> SamplerRun:
    stats = trace.sample_stats
    if "perf_counter_diff" not in stats:
        return SamplerRun(name, trace, wall, np.nan)
    diff = np.asarray(stats["perf_counter_diff"].values, dtype=float)
    finish = None
    if "perf_counter_start" in stats:
        finish = np.asarray(stats["perf_counter_start"].values, dtype=float) + diff - start
    return SamplerRun(name, trace, wall, float(diff.sum()), finish)


# ----------------------------------------------------------------- measuring
def _coordinates(trace) -> np.ndarray:
    """Every coordinate of every posterior variable: ``(chain, draw, coordinates)``."""
    posterior = trace.posterior
    columns = []
    for name in posterior.data_vars:
        values = np.asarray(posterior[name].values, dtype=float)
        columns.append(values.reshape(values.shape[0], values.shape[1], -1))
    return np.concatenate(columns, axis=2)


def _ess(draws: np.ndarray, method: str) -> np.ndarray:
    """ArviZ ESS of every coordinate of ``(chain, draw, coordinates)`` (arviz 0.23 and 1.x)."""
    dataset = xr.Dataset({"x": (("chain", "draw", "coordinate"), draws)})
    return np.asarray(az.ess(dataset, method=method)["x"].values, dtype=float)


def _moments(trace) -> tuple[np.ndarray, np.ndarray]:
    draws = _coordinates(trace)
    return draws.mean(axis=(0, 1)), draws.std(axis=(0, 1), ddof=1)


def _stat_mean(stats, *names: str) -> float:
    for name in names:
        if name in stats:
            return float(np.mean(np.asarray(stats[name].values, dtype=float)))
    return np.nan


def _evaluations(stats) -> tuple[float, float]:
    """Exact logp and gradient evaluations per draw."""
    if "n_logp_evals" in stats:
        return _stat_mean(stats, "n_logp_evals"), _stat_mean(stats, "n_gradient_evals")
    steps = _stat_mean(stats, "n_steps")  # NUTS: one joint evaluation per leapfrog step
    return steps, steps


def comparison_table(runs: Mapping[str, SamplerRun], reference: str) -> pd.DataFrame:
    """The table of :func:`compare_samplers` (see there for its columns)."""
    reference_draws = _coordinates(runs[reference].trace)
    reference_mcse = _mcse(reference_draws, _ess(reference_draws, "bulk"))
    rows = {}
    for name, run in runs.items():
        draws = _coordinates(run.trace)
        bulk, tail = _ess(draws, "bulk"), _ess(draws, "tail")
        stats = run.trace.sample_stats
        logps, gradients = _evaluations(stats)
        difference = np.abs(draws.mean(axis=(0, 1)) - reference_draws.mean(axis=(0, 1)))
        with np.errstate(divide="ignore", invalid="ignore"):
            in_mcse = difference / np.hypot(_mcse(draws, bulk), reference_mcse)
        rows[name] = {
            "whole call s": run.whole_call_seconds,
            "draws s": run.draw_seconds,
            "min bulk ESS": bulk.min(),
            "median bulk ESS": float(np.median(bulk)),
            "min tail ESS": tail.min(),
            "median tail ESS": float(np.median(tail)),
            "bulk ESS/s (draws)": bulk.min() / run.draw_seconds,
            "tail ESS/s (draws)": tail.min() / run.draw_seconds,
            "bulk ESS/s (call)": bulk.min() / run.whole_call_seconds,
            "tail ESS/s (call)": tail.min() / run.whole_call_seconds,
            "logp evals/draw": logps,
            "grad evals/draw": gradients,
            "accept": _stat_mean(stats, "accept", "acceptance_rate", "mean_tree_accept"),
            "divergences": int(np.sum(np.asarray(stats["diverging"].values)))
            if "diverging" in stats
            else 0,
            "max |dmean| (MCSE)": 0.0 if name == reference else float(np.nanmax(in_mcse)),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "sampler"
    return table


def _mcse(draws: np.ndarray, bulk_ess: np.ndarray) -> np.ndarray:
    """Monte Carlo standard error of each coordinate's mean (sd over the bulk ESS)."""
    return draws.std(axis=(0, 1), ddof=1) / np.sqrt(bulk_ess)


def error_over_time(
    run: SamplerRun, mean: np.ndarray, sd: np.ndarray, points: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Largest ``|mean of the draws done by t - mean| / sd`` at up to ``points`` times ``t``."""
    draws = _coordinates(run.trace)
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


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The comparison's figures need matplotlib: pip install matplotlib (or the "
            "'benchmark' extra)."
        ) from err
    return plt
