"""One call that samples a model with PyMC's NUTS (and nutpie) and surrogate samplers, and compares.

:func:`compare_samplers` runs every sampler on the same model with the same tuning, draws,
chains and seed (unless a sampler's own options say otherwise), timing each whole call, and
returns a :class:`SamplerComparison`: a tidy table (ESS from ArviZ, per second of the draws and
of the whole call; exact evaluations per draw; acceptance; divergences; how far each posterior
mean is from the reference's, in Monte Carlo standard errors) and two figures (ESS per second;
relative error of the posterior means against wall time).

Its pieces serve runs made one at a time (the benchmark scripts time, profile and record runs
this way): :func:`run_sampler` is one run, :func:`comparison_table` the table of any runs, and
:func:`posterior_coordinates` and :func:`coordinate_ess` the draws and the ESS the table uses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from pymc_rnshmc.step_methods.exact_model import has_gradient

__all__ = [
    "SamplerComparison",
    "SamplerRun",
    "compare_samplers",
    "comparison_table",
    "coordinate_ess",
    "error_over_time",
    "posterior_coordinates",
    "run_sampler",
]

_log = logging.getLogger("pymc.rnshmc")

NUTS_NAME = "PyMC NUTS"
NUTPIE_NAME = "nutpie"
NUTS_BACKENDS = ("pymc", "nutpie")
"""The strings that stand for a NUTS implementation among the samplers, as ``pm.sample``'s
``nuts_sampler`` names them."""


@dataclass
class SamplerRun:
    """One sampler's result.

    Attributes
    ----------
    name : str
    trace : InferenceData or DataTree
        What ``pm.sample`` (or ``nutpie.sample``) returned, with the tuning draws in its
        ``warmup_*`` groups when they were kept.
    whole_call_seconds : float
        Wall time of the whole call: building the step, tuning, fits and draws (nutpie: compiling
        the model and sampling).
    draw_seconds : float
        Seconds of the draws after tuning, from the step's own per-draw timers summed over the
        chains (NaN without them). nutpie keeps none: its sampling time in proportion to its
        leapfrog steps after tuning.
    finish_seconds : ndarray or None
        ``(chain, draw)`` seconds since the call started at which each kept draw was done
        (``None`` without per-draw timers).
    backend : {"pymc", "nutpie"}
        What ran the draws. NUTS's evaluations per draw depend on it: PyMC's evaluates the
        start of every trajectory again, nutpie's reuses it.
    step : step method or None
        The step ``pm.sample`` ran (``None`` when ``pm.sample`` built its own NUTS, and for
        nutpie). After the call it holds the state of the last chain sampled in this process;
        chains sampled in worker processes (``cores > 1``) leave it untouched.
    started : float
        ``time.perf_counter()`` when the call started: the origin of ``finish_seconds``. The
        clock is system-wide, so a trace's ``perf_counter_start`` minus it is the time since the
        call started, in worker processes too.
    compile_seconds : float
        nutpie: the part of the whole call spent compiling the model (NaN for ``pm.sample``,
        whose steps compile inside the call).
    """

    name: str
    trace: Any
    whole_call_seconds: float
    draw_seconds: float
    finish_seconds: np.ndarray | None = None
    backend: str = "pymc"
    step: Any = None
    started: float = np.nan
    compile_seconds: float = np.nan


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
            _, ax = plt.subplots(figsize=(8, 1.0 + 0.6 * len(self.table)), layout="constrained")
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
        ax.set_xlabel("min ESS per second (log scale)")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return ax

    def plot_error_vs_time(self, ax=None):
        """Largest relative error of the posterior means against wall time of the call.

        At each time, the means of every draw done by then (all chains), against the
        reference's final means, in units of the reference's posterior sds. A run without
        per-draw timers (nutpie) is one point at the end of its call.
        """
        plt = _pyplot()
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4), layout="constrained")
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
    discard_tuned_samples: bool = True,
    sample_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> SamplerComparison:
    """Sample ``model`` with PyMC's NUTS, nutpie and the given samplers, and compare them.

    Every sampler runs with the same ``tune``, ``draws``, ``chains``, ``cores`` and
    ``random_seed`` unless its ``sample_kwargs`` say otherwise, one after another, each whole
    call timed (:func:`run_sampler`).

    Parameters
    ----------
    model : pymc.Model, optional
        Default: the model of the enclosing ``with`` block.
    samplers : mapping or sequence, optional
        Samplers to compare: a step class (``RNSHMC``), a step instance, a callable that returns
        a step (built inside the model's context), or a NUTS implementation by name, ``"pymc"``
        or ``"nutpie"`` (run under another name with its own ``sample_kwargs``: NUTS with a
        dense mass matrix, nutpie with low-rank adaptation). A mapping gives their names, a
        sequence names them after their class (``"pymc"``: "PyMC NUTS"). Default
        ``{"RNSHMC": RNSHMC}``.
    tune, draws, chains, cores, random_seed
        Of every sampling call.
    nuts : bool
        Include PyMC's own NUTS (``"PyMC NUTS"``: ``pm.sample`` with its default
        initialisation).
    nutpie : bool, optional
        Include nutpie; default when it is installed. No NUTS runs on a model whose logp has no
        gradient: they are skipped and say so.
    progressbar : bool
        PyMC's progress bar for each run.
    reference : str, optional
        The run whose posterior means the others are compared with; default the first run of
        ``"pymc"`` (PyMC's NUTS) if one ran, else the first run.
    discard_tuned_samples : bool
        ``False`` keeps the tuning draws and their statistics in every trace.
    sample_kwargs : mapping of str to mapping, optional
        Per run name, keyword arguments of its call that override the shared ones (``{"ARNSHMC":
        {"tune": 500}}``) or add to them: of ``pm.sample`` (``{"NUTS dense": {"init":
        "jitter+adapt_full"}}``) or, for nutpie, of ``nutpie.sample`` (``{"nutpie low-rank":
        {"adaptation": "low_rank"}}``).

    Returns
    -------
    SamplerComparison
        Its ``table`` has, per run: ``whole call s``, ``draws s`` (the draws after tuning, from
        the step's timers; nutpie's sampling time in proportion to its leapfrog steps after
        tuning), min and median bulk ESS and min and median tail ESS over every coordinate
        (ArviZ), bulk and tail ESS per second of the draws and of the whole call, ``logp
        evals/draw`` and ``grad evals/draw`` (exact evaluations after tuning; NUTS evaluates
        logp and gradient together, once per leapfrog step, and PyMC's once more at the start of
        each trajectory), ``accept``, ``divergences`` (after tuning), and ``max |dmean|
        (MCSE)``: the largest difference of a posterior mean from the reference's, in Monte
        Carlo standard errors of both, over the variables both report.

    Examples
    --------
    >>> from pymc_rnshmc import RNSHMC, compare_samplers
    >>> with model:  # doctest: +SKIP
    ...     comparison = compare_samplers(
    ...         samplers={"RNSHMC": RNSHMC, "NUTS dense": "pymc"},
    ...         sample_kwargs={"NUTS dense": {"init": "jitter+adapt_full"}},
    ...     )
    >>> print(comparison)  # doctest: +SKIP
    >>> comparison.plot_ess()  # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    every: dict[str, Any] = {}
    if nuts:
        every[NUTS_NAME] = "pymc"
    if _nutpie_installed() if nutpie is None else nutpie:
        every[NUTPIE_NAME] = "nutpie"
    every |= _named_samplers(samplers)
    skipped = _unrunnable(model, every)
    every = {name: sampler for name, sampler in every.items() if name not in skipped}
    sample_kwargs = dict(sample_kwargs or {})
    unknown = set(sample_kwargs) - set(every) - set(skipped)
    if unknown:
        raise ValueError(
            f"sample_kwargs names {sorted(unknown)}, not among the runs {list(every)}."
        )
    if not every:
        raise ValueError("compare_samplers has nothing to run: give samplers or nuts=True.")
    if reference is None:
        nuts_runs = [name for name, sampler in every.items() if _is_backend(sampler, "pymc")]
        reference = (nuts_runs or list(every))[0]
    if reference not in every:
        raise ValueError(f"reference {reference!r} is not among the runs {list(every)}.")
    shared = {
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "cores": cores,
        "random_seed": random_seed,
        "progressbar": progressbar,
        "discard_tuned_samples": discard_tuned_samples,
    }
    runs: dict[str, SamplerRun] = {}
    for position, (name, sampler) in enumerate(every.items(), start=1):
        _log.info("compare_samplers: %s (%d of %d)", name, position, len(every))
        options = shared | dict(sample_kwargs.get(name, {}))
        runs[name] = run_sampler(sampler, model, name=name, **options)
    return SamplerComparison(runs, reference, skipped)


def run_sampler(
    sampler: Any,
    model: pm.Model | None = None,
    *,
    name: str | None = None,
    tune: int = 1000,
    draws: int = 1000,
    chains: int = 2,
    cores: int = 1,
    random_seed: int = 1,
    progressbar: bool = True,
    discard_tuned_samples: bool = True,
    **sample_kwargs: Any,
) -> SamplerRun:
    """Sample ``model`` with one sampler and time the whole call, as :func:`compare_samplers` does.

    Parameters
    ----------
    sampler : step class, step instance, callable, "pymc" or "nutpie"
        As in :func:`compare_samplers`: ``"pymc"`` lets ``pm.sample`` build its NUTS,
        ``"nutpie"`` compiles the model with ``nutpie.compile_pymc_model`` and samples with
        ``nutpie.sample``.
    model : pymc.Model, optional
        Default: the model of the enclosing ``with`` block.
    name : str, optional
        The run's name; default the sampler's class name ("PyMC NUTS", "nutpie").
    tune, draws, chains, cores, random_seed, progressbar
        Of the call (for nutpie, ``random_seed`` is its ``seed`` and ``progressbar`` its
        ``progress_bar``).
    discard_tuned_samples : bool
        ``False`` keeps the tuning draws and their statistics in the trace (``warmup_*``
        groups).
    **sample_kwargs
        Further keyword arguments of ``pm.sample`` (``init="jitter+adapt_full"``,
        ``target_accept``, ``idata_kwargs``, ...) or, for nutpie, of ``nutpie.sample``
        (``adaptation="low_rank"``, ``progress_callback``, ...).

    Returns
    -------
    SamplerRun
        Its clock starts before a step class or callable builds the step (the surrogate samplers
        compile the model there; a step instance was built before) and, for nutpie, before the
        model is compiled.
    """
    model = pm.modelcontext(model)
    name = _sampler_name(sampler) if name is None else name
    shared = {"tune": tune, "draws": draws, "chains": chains, "cores": cores}
    if _is_backend(sampler, "nutpie"):
        options = shared | {"seed": random_seed, "progress_bar": progressbar}
        return _run_nutpie(name, model, options | sample_kwargs, discard_tuned_samples)
    options = shared | {
        "random_seed": random_seed,
        "progressbar": progressbar,
        "discard_tuned_samples": discard_tuned_samples,
        "compute_convergence_checks": False,
    }
    if _is_backend(sampler, "pymc"):
        options["nuts_sampler"] = "pymc"  # PyMC 6 picks nutpie by default where installed
    with model:
        started = time.perf_counter()
        step = None if _is_backend(sampler, "pymc") else _build(sampler)
        trace = pm.sample(step=step, **(options | sample_kwargs))
        wall = time.perf_counter() - started
    return _pymc_run(name, trace, wall, started, step)


# ----------------------------------------------------------------- running
def _named_samplers(samplers) -> dict[str, Any]:
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
    named, seen = {}, {}
    for name, sampler in items:
        if isinstance(sampler, str) and sampler not in NUTS_BACKENDS:
            raise TypeError(f"{name!r}: a sampler named by a string is one of {NUTS_BACKENDS}.")
        if not (isinstance(sampler, str) or callable(sampler) or hasattr(sampler, "step")):
            raise TypeError(
                f"{name!r}: a sampler must be a step class, a step instance, a callable that "
                f"returns a step, or one of {NUTS_BACKENDS}; got {sampler!r}."
            )
        seen[name] = seen.get(name, 0) + 1
        named[name if seen[name] == 1 else f"{name} ({seen[name]})"] = sampler
    return named


def _sampler_name(sampler) -> str:
    if isinstance(sampler, str):
        return {"pymc": NUTS_NAME, "nutpie": NUTPIE_NAME}.get(sampler, sampler)
    if isinstance(sampler, type):
        return sampler.__name__
    if hasattr(sampler, "step"):
        return type(sampler).__name__
    return getattr(sampler, "__name__", type(sampler).__name__)


def _is_backend(sampler, backend: str) -> bool:
    return isinstance(sampler, str) and sampler == backend


def _build(sampler):
    """The step of a step class or callable; a step instance as it is."""
    if isinstance(sampler, type) or not hasattr(sampler, "step"):
        return sampler()
    return sampler


def _unrunnable(model, samplers: dict) -> dict[str, str]:
    """The NUTS runs that cannot run (no gradient, nutpie not installed), and why."""
    wanted = {name: s for name, s in samplers.items() if isinstance(s, str)}
    if not wanted:
        return {}
    if not has_gradient(model, model.value_vars):
        return dict.fromkeys(wanted, "the model's logp has no gradient")
    if _nutpie_installed():
        return {}
    reason = "not installed (pip install nutpie)"
    return {name: reason for name, sampler in wanted.items() if sampler == "nutpie"}


def _nutpie_installed() -> bool:
    try:
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def _run_nutpie(name: str, model, options: dict, discard_tuned_samples: bool) -> SamplerRun:
    import nutpie

    started = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compiled_at = time.perf_counter()
    trace = nutpie.sample(compiled, **({"save_warmup": True} | options))
    ended = time.perf_counter()
    draw_seconds = (ended - compiled_at) * _share_after_tuning(trace)
    if discard_tuned_samples:
        for group in [g for g in _groups(trace) if g.startswith("warmup_")]:
            del trace[group]
    return SamplerRun(
        name,
        trace,
        ended - started,
        draw_seconds,
        backend="nutpie",
        started=started,
        compile_seconds=compiled_at - started,
    )


def _share_after_tuning(trace) -> float:
    """The share of the leapfrog steps made after tuning (NaN without the tuning's)."""
    if "warmup_sample_stats" not in _groups(trace):
        return np.nan
    after = float(np.sum(trace.sample_stats["n_steps"].values))
    return after / (after + float(np.sum(trace.warmup_sample_stats["n_steps"].values)))


def _groups(trace) -> list[str]:
    """The groups of an InferenceData (arviz 0.23) or DataTree (arviz 1.x)."""
    return list(trace.children) if hasattr(trace, "children") else list(trace.groups())


def _pymc_run(name: str, trace, wall: float, started: float, step) -> SamplerRun:
    stats = trace.sample_stats
    if "perf_counter_diff" not in stats:
        return SamplerRun(name, trace, wall, np.nan, step=step, started=started)
    diff = np.asarray(stats["perf_counter_diff"].values, dtype=float)
    finish = None
    if "perf_counter_start" in stats:
        finish = np.asarray(stats["perf_counter_start"].values, dtype=float) + diff - started
    return SamplerRun(name, trace, wall, float(diff.sum()), finish, step=step, started=started)


# ----------------------------------------------------------------- measuring
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
        One ESS per coordinate (NaN where ArviZ gives none, as for a constant coordinate).
    """
    dataset = xr.Dataset({"x": (("chain", "draw", "coordinate"), np.asarray(draws, dtype=float))})
    return np.asarray(az.ess(dataset, method=method)["x"].values, dtype=float)


def _moments(trace) -> tuple[np.ndarray, np.ndarray]:
    draws = posterior_coordinates(trace.posterior)
    return draws.mean(axis=(0, 1)), draws.std(axis=(0, 1), ddof=1)


def _stat_mean(stats, *names: str) -> float:
    for name in names:
        if name in stats:
            return float(np.mean(np.asarray(stats[name].values, dtype=float)))
    return np.nan


def _evaluations(stats, backend: str) -> tuple[float, float]:
    """Exact logp and gradient evaluations per draw."""
    if "n_logp_evals" in stats:
        return _stat_mean(stats, "n_logp_evals"), _stat_mean(stats, "n_gradient_evals")
    # NUTS: one joint evaluation per leapfrog step; PyMC's also evaluates each start again
    steps = _stat_mean(stats, "n_steps") + (1.0 if backend == "pymc" else 0.0)
    return steps, steps


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
        mcse = draws.std(axis=(0, 1), ddof=1) / np.sqrt(bulk)
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
    """
    summaries = {name: _Summary.of(run.trace) for name, run in runs.items()}
    rows = {}
    for name, run in runs.items():
        summary, stats = summaries[name], run.trace.sample_stats
        bulk, tail = summary.bulk.min(), summary.tail.min()
        logps, gradients = _evaluations(stats, run.backend)
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
            "logp evals/draw": logps,
            "grad evals/draw": gradients,
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


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The comparison's figures need matplotlib: pip install matplotlib (or the "
            "'benchmark' extra)."
        ) from err
    return plt
