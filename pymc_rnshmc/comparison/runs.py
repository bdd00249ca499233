"""One timed sampling call: :func:`run_sampler` and the :class:`SamplerRun` it returns.

A sampler is a step class, a step instance, a callable that builds a step inside the model's
context, or a NUTS implementation by name (``"pymc"``, ``"nutpie"``). The clock of a run starts
before its step is built (the surrogate samplers compile the model there) or, for nutpie, before
the model is compiled, and the steps' own per-draw timers give the seconds of the draws after
tuning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm

__all__ = [
    "NUTPIE_NAME",
    "NUTS_BACKENDS",
    "NUTS_NAME",
    "SamplerRun",
    "evaluations",
    "is_backend",
    "nutpie_installed",
    "run_sampler",
    "sampler_name",
]

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
    tuning_evaluations : tuple of float
        Exact logp and gradient evaluations of the tuning draws, over every chain
        (:func:`evaluations`); zero for a call with ``tune=0``, NaN when the call did not
        report them.

    Examples
    --------
    :func:`run_sampler` returns one; made here by hand for a call it does not make, to put
    it in :func:`comparison_table`:

    >>> import time
    >>> import numpy as np
    >>> import pymc as pm
    >>> from pymc_rnshmc import SamplerRun, comparison_table
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     started = time.perf_counter()
    ...     trace = pm.sample(
    ...         step=pm.Metropolis(), tune=300, draws=200, chains=1, random_seed=1,
    ...         progressbar=False, compute_convergence_checks=False,
    ...     )
    >>> run = SamplerRun("Metropolis", trace, time.perf_counter() - started, np.nan)
    >>> list(comparison_table({run.name: run}).index)
    ['Metropolis']
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
    tuning_evaluations: tuple[float, float] = (np.nan, np.nan)


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

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, run_sampler
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     run = run_sampler(RNSHMC, tune=300, draws=200, chains=1, progressbar=False)
    >>> run.name, run.backend
    ('RNSHMC', 'pymc')
    >>> bool(0 < run.draw_seconds < run.whole_call_seconds)
    True
    """
    model = pm.modelcontext(model)
    name = sampler_name(sampler) if name is None else name
    discard_tuned_samples = sample_kwargs.pop("discard_tuned_samples", discard_tuned_samples)
    shared = {"tune": tune, "draws": draws, "chains": chains, "cores": cores}
    if is_backend(sampler, "nutpie"):
        options = shared | {"seed": random_seed, "progress_bar": progressbar}
        return _run_nutpie(name, model, options | sample_kwargs, discard_tuned_samples)
    options = shared | {
        "random_seed": random_seed,
        "progressbar": progressbar,
        "discard_tuned_samples": False,  # counted, then dropped if asked
        "compute_convergence_checks": False,
    }
    if is_backend(sampler, "pymc"):
        options["nuts_sampler"] = "pymc"  # PyMC 6 picks nutpie by default where installed
    with model:
        started = time.perf_counter()
        step = None if is_backend(sampler, "pymc") else _build(sampler)
        trace = pm.sample(step=step, **(options | sample_kwargs))
        wall = time.perf_counter() - started
    run = _pymc_run(name, trace, wall, started, step)
    run.tuning_evaluations = _tuning_evaluations(trace, "pymc", tune)
    if discard_tuned_samples:
        _drop_warmup(trace)
    return run


def sampler_name(sampler) -> str:
    """A run's default name: the class name, or "PyMC NUTS" / "nutpie" for a backend."""
    if isinstance(sampler, str):
        return {"pymc": NUTS_NAME, "nutpie": NUTPIE_NAME}.get(sampler, sampler)
    if isinstance(sampler, type):
        return sampler.__name__
    if hasattr(sampler, "step"):
        return type(sampler).__name__
    return getattr(sampler, "__name__", type(sampler).__name__)


def is_backend(sampler, backend: str) -> bool:
    """Whether ``sampler`` is the NUTS implementation named ``backend``."""
    return isinstance(sampler, str) and sampler == backend


def _build(sampler):
    """The step of a step class or callable; a step instance as it is."""
    if isinstance(sampler, type) or not hasattr(sampler, "step"):
        return sampler()
    return sampler


def nutpie_installed() -> bool:
    """Whether nutpie can be imported."""
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
    draw_seconds = (ended - compiled_at) * _share_after_tuning(trace, options["tune"])
    tuning = _tuning_evaluations(trace, "nutpie", options["tune"])
    if discard_tuned_samples:
        _drop_warmup(trace)
    return SamplerRun(
        name,
        trace,
        ended - started,
        draw_seconds,
        backend="nutpie",
        started=started,
        compile_seconds=compiled_at - started,
        tuning_evaluations=tuning,
    )


def evaluations(stats, backend: str) -> tuple[np.ndarray, np.ndarray]:
    """Exact logp and gradient evaluations of each draw of a ``sample_stats`` group.

    The surrogate steps count theirs (``n_logp_evals``, ``n_gradient_evals``). NUTS evaluates
    logp and gradient together once per leapfrog step, and PyMC's NUTS once more at the start of
    each trajectory (nutpie reuses it). Other steps report no count: NaN.
    """
    if "n_logp_evals" in stats:
        logps = np.asarray(stats["n_logp_evals"].values, dtype=float)
        return logps, np.asarray(stats["n_gradient_evals"].values, dtype=float)
    if "n_steps" not in stats:  # another step (Metropolis, DEMetropolisZ): not counted
        name = next(iter(stats.data_vars))
        unknown = np.full(np.shape(stats[name].values)[:2], np.nan)
        return unknown, unknown
    steps = np.asarray(stats["n_steps"].values, dtype=float) + (backend == "pymc")
    return steps, steps


def _tuning_evaluations(trace, backend: str, tune: int) -> tuple[float, float]:
    """The tuning draws' exact evaluations over every chain.

    Zero without tuning draws (``tune=0``: the trace has no ``warmup_*`` groups); NaN where
    there were some and they were not kept.
    """
    if tune == 0:
        return 0.0, 0.0
    if "warmup_sample_stats" not in _groups(trace):
        return np.nan, np.nan
    logps, gradients = evaluations(trace.warmup_sample_stats, backend)
    return float(logps.sum()), float(gradients.sum())


def _drop_warmup(trace) -> None:
    """Remove the ``warmup_*`` groups (InferenceData or DataTree)."""
    for group in [g for g in _groups(trace) if g.startswith("warmup_")]:
        del trace[group]


def _share_after_tuning(trace, tune: int) -> float:
    """The share of the leapfrog steps made after tuning.

    All of them without tuning draws (``tune=0``); NaN where the tuning's were not kept.
    """
    if tune == 0:
        return 1.0
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
