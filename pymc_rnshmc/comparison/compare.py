"""One call that runs every sampler on a model and compares them: :func:`compare_samplers`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm

from pymc_rnshmc.comparison.runs import (
    NUTPIE_NAME,
    NUTS_BACKENDS,
    NUTS_NAME,
    SamplerRun,
    is_backend,
    nutpie_installed,
    run_sampler,
    sampler_name,
)
from pymc_rnshmc.comparison.table import comparison_table, error_over_time, posterior_moments
from pymc_rnshmc.step_methods.exact_model import has_gradient

__all__ = ["SamplerComparison", "compare_samplers"]

_log = logging.getLogger("pymc.rnshmc")


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

    Examples
    --------
    :func:`compare_samplers` returns one; made here from runs of :func:`run_sampler`:

    >>> import matplotlib.pyplot as plt
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, SamplerComparison, run_sampler
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     options = dict(tune=300, draws=200, chains=1, progressbar=False)
    ...     nuts = run_sampler("pymc", **options)
    ...     rnshmc = run_sampler(RNSHMC, **options)
    >>> comparison = SamplerComparison({"NUTS": nuts, "RNSHMC": rnshmc}, reference="NUTS")
    >>> list(comparison.table.index)
    ['NUTS', 'RNSHMC']
    >>> comparison.plot_error_vs_time().get_xlabel()
    'seconds since the call started'
    >>> plt.close("all")
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
        mean, sd = posterior_moments(self.runs[self.reference].trace)
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
        each trajectory), ``logps to ESS 1000`` and ``gradients to ESS 1000`` (exact evaluations
        of the whole call, tuning included, until the min bulk and tail ESS would reach 1000:
        the kept draws' scaled by 1000 over the smaller of the two, machine-independent),
        ``s to ESS 1000`` (the same projection of the whole call's seconds), ``accept``,
        ``divergences`` (after tuning), and ``max |dmean|
        (MCSE)``: the largest difference of a posterior mean from the reference's, in Monte
        Carlo standard errors of both, over the variables both report.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import pymc as pm
    >>> from pymc_rnshmc import RNSHMC, compare_samplers
    >>> with pm.Model():
    ...     x = pm.Normal("x", 1, 2, shape=2)
    ...     comparison = compare_samplers(
    ...         samplers={"RNSHMC": RNSHMC, "NUTS dense": "pymc"},
    ...         sample_kwargs={"NUTS dense": {"init": "jitter+adapt_full"}},
    ...         tune=300, draws=200, chains=1, nutpie=False, progressbar=False,
    ...     )
    >>> list(comparison.table.index)
    ['PyMC NUTS', 'RNSHMC', 'NUTS dense']
    >>> comparison.plot_ess().get_xlabel()
    'min ESS per second (log scale)'
    >>> plt.close("all")

    ``print(comparison)`` shows the table.
    """
    model = pm.modelcontext(model)
    every: dict[str, Any] = {}
    if nuts:
        every[NUTS_NAME] = "pymc"
    if nutpie_installed() if nutpie is None else nutpie:
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
        nuts_runs = [name for name, sampler in every.items() if is_backend(sampler, "pymc")]
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


def _named_samplers(samplers) -> dict[str, Any]:
    if samplers is None:
        from pymc_rnshmc.step_methods import RNSHMC

        samplers = {"RNSHMC": RNSHMC}
    if isinstance(samplers, Mapping):
        items = list(samplers.items())
    elif isinstance(samplers, Sequence) and not isinstance(samplers, str):
        items = [(sampler_name(sampler), sampler) for sampler in samplers]
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


def _unrunnable(model, samplers: dict) -> dict[str, str]:
    """The NUTS runs that cannot run (no gradient, nutpie not installed), and why."""
    wanted = {name: s for name, s in samplers.items() if isinstance(s, str)}
    if not wanted:
        return {}
    if not has_gradient(model, model.value_vars):
        return dict.fromkeys(wanted, "the model's logp has no gradient")
    if nutpie_installed():
        return {}
    reason = "not installed (pip install nutpie)"
    return {name: reason for name, sampler in wanted.items() if sampler == "nutpie"}


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The comparison's figures need matplotlib: pip install matplotlib (or the "
            "'benchmark' extra)."
        ) from err
    return plt
