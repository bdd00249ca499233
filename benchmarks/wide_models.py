"""Where the whole call goes as the model widens: RNSHMC against NUTS with a dense mass matrix.

    python -m benchmarks.wide_models                                   # d = 20 .. 320, seed 1
    python -m benchmarks.wide_models --dims 20,40 --seeds 1,2 --output wide_models_small
    python -m benchmarks.wide_models --dims 10 --tune 200 --draws 200 --output smoke_wide_models
    python -m benchmarks.wide_models --plot wide_models_width_stop_baseline,\
wide_models_held_out_period,wide_models_first_refit_320,wide_models_exact_work_80,\
wide_models_hierarchical_fallback,wide_models_hierarchical_100_gives_up \
        --figure docs/figures/wide-models-scaling.png    # the docs' figure, from result files

The workload (``--workload``) is :func:`pymc_rnshmc.workloads.correlated_logistic_regression`
(``logistic``, the default: 20 000 rows, AR(1) correlated predictors, ``--dims`` coefficients),
:func:`~pymc_rnshmc.workloads.hierarchical_logistic_regression` (``hierarchical``: non-centred,
20 000 rows in groups of unequal size, ``--dims`` groups, so ``groups + 6`` parameters),
:func:`~pymc_rnshmc.workloads.multilevel_regression` (``multilevel``: non-centred, a varying
intercept and two slopes on 5000 rows, ``--dims`` groups, so ``3 groups + 7`` parameters), or the
posteriordb ``mcycle_gp-accel_gp`` (``mcycle_gp``: 66 parameters, ``--dims`` ignored). The
column ``d`` is always the number of parameters.

Per width, seed and sampler, one chain of ``--tune`` + ``--draws`` (one core, BLAS pinned to one
thread), timed as a whole ``pm.sample`` call. The call is split by the
draws' own timers (``perf_counter_diff``, which include everything done inside a draw) and the
``phase`` stat:

- **exploring**: exact draws before the surrogate starts (NUTS with its own adaptation);
- **fits**: the warm-up's fits and refits (timed here by wrapping
  :meth:`~pymc_rnshmc.step_methods.warmup.SurrogateWarmup.fit` and ``refit``; they run inside a
  draw, and are taken out of that draw's phase);
- **surrogate tuning** and **net tuning**: surrogate draws and the safety net's exact draws
  while tuning;
- **alone**: tuning draws on the surrogate alone (no exact evaluation, ``phase`` 4);
- **exact fall-back**: exact draws after the surrogate was given up;
- **kept draws**: the draws after tuning;
- **outside the draws**: the rest of the call (building the step, compiling, PyMC's own work).

For each, the exact logp and gradient evaluations too. Then the min bulk and tail ESS per kept
draw over every coefficient (ArviZ), the exact evaluations until both would reach 1000 (tuning
plus the kept draws scaled), the surrogate's fit (units, held-out error), and its trajectories
(metric, step size, path length, leapfrog steps a draw, acceptance). NUTS dense
(``init="jitter+adapt_full"``) is the baseline: its tuning counts as exploring; ``--samplers`` can
add ``NUTS`` (PyMC's, diagonal mass matrix), ``nutpie`` and ``nutpie low-rank`` (whole call and
ESS only: nutpie reports no parts), and ``RNSHMC from jitter`` (``explore_from_mode=False``: the
exploring NUTS starts as PyMC's does) and ``RNSHMC nuts`` (``dynamics="nuts"``).

Results go to ``benchmarks/results/<output>.{json,md}`` after every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import functools
import time

import numpy as np

from benchmarks import results_table
from benchmarks.measure import run_metadata, write_results
from benchmarks.results_table import workload_of
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.comparison import SamplerRun, comparison_table, run_sampler
from pymc_rnshmc.comparison.runs import evaluations
from pymc_rnshmc.step_methods.warmup import SurrogateWarmup
from pymc_rnshmc.surrogates.base import fit_summary, held_out_error
from pymc_rnshmc.workloads import (
    correlated_logistic_regression,
    hierarchical_logistic_regression,
    multilevel_regression,
)

PHASES = {
    0: "exploring",
    1: "surrogate tuning",
    2: "net tuning",
    3: "exact fall-back",
    4: "surrogate alone",
}
"""The ``phase`` stat's codes while tuning, and the part of the call each is."""


@contextlib.contextmanager
def timed_fits(record: list):
    """Record ``(iteration, seconds)`` of every warm-up fit and refit while inside."""
    originals = {name: getattr(SurrogateWarmup, name) for name in ("fit", "refit")}

    def wrap(original):
        def timed(self, iteration, *args, **kwargs):
            clock = time.perf_counter()
            try:
                return original(self, iteration, *args, **kwargs)
            finally:
                record.append((int(iteration), time.perf_counter() - clock))

        return timed

    for name, original in originals.items():
        setattr(SurrogateWarmup, name, wrap(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(SurrogateWarmup, name, original)


def motorcycle_gp(_width: int):
    """The posteriordb ``mcycle_gp-accel_gp`` model (its width is fixed)."""
    from benchmarks import posteriordb_table as pdb

    data, _ = pdb.load_posterior("mcycle_gp-accel_gp", pdb.POSTERIORDB)
    return pdb.POSTERIORS["mcycle_gp-accel_gp"](data)


WORKLOADS = {
    "logistic": correlated_logistic_regression,
    "hierarchical": hierarchical_logistic_regression,
    "multilevel": multilevel_regression,
    "mcycle_gp": motorcycle_gp,
}
"""``--workload``'s models, each built from the width ``--dims`` gives."""


def sample(model, sampler: str, args, seed: int) -> tuple[SamplerRun, list]:
    """:func:`timed_call` of the sampler called ``sampler``."""
    step = BACKENDS.get(sampler, STEPS.get(sampler, RNSHMC))
    return timed_call(model, step, sampler, args, seed, **OPTIONS.get(sampler, {}))


def timed_call(model, step, name: str, args, seed: int, **options) -> tuple[SamplerRun, list]:
    """One chain's timed call (:func:`~pymc_rnshmc.comparison.run_sampler`) of ``args.tune`` +
    ``args.draws``, tuning draws kept, and the fits' times."""
    fits: list = []
    with timed_fits(fits):
        run = run_sampler(
            step,
            model,
            name=name,
            tune=args.tune,
            draws=args.draws,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            discard_tuned_samples=False,
            **options,
        )
    return run, fits


BACKENDS = {
    "NUTS dense": "pymc",
    "NUTS": "pymc",
    "nutpie": "nutpie",
    "nutpie low-rank": "nutpie",
}
"""The baselines by name (``NUTS`` has PyMC's diagonal mass matrix)."""
STEPS = {
    "RNSHMC from jitter": functools.partial(RNSHMC, explore_from_mode=False),
    "RNSHMC nuts": functools.partial(RNSHMC, dynamics="nuts"),
    "RNSHMC net 0.05": functools.partial(RNSHMC, safety_net=0.05),
    "RNSHMC exploring 120": functools.partial(RNSHMC, exploration_steps=120),
}
"""Surrogate samplers other than RNSHMC's defaults (any name not listed is RNSHMC)."""
OPTIONS = {
    "NUTS dense": {"init": "jitter+adapt_full"},
    "nutpie low-rank": {"adaptation": "low_rank"},
}
"""The baselines' options."""


def _stat(group, name: str, default: float = 0.0) -> np.ndarray:
    if name in group:
        return np.asarray(group[name].values, dtype=float).ravel()
    return np.full(group.sizes["draw"], default)


def breakdown(run: SamplerRun, fits: list) -> dict:
    """Seconds and exact evaluations of each part of the call (see the module docstring)."""
    warm, kept = run.trace.warmup_sample_stats, run.trace.sample_stats
    phase = _stat(warm, "phase").astype(int)
    draw_seconds = _stat(warm, "perf_counter_diff")
    fit_seconds = np.zeros_like(draw_seconds)
    for iteration, spent in fits:
        fit_seconds[min(iteration, len(fit_seconds) - 1)] += spent
    logps, gradients = (values.ravel() for values in evaluations(warm, run.backend))
    parts = {}
    for code, name in PHASES.items():
        mine = phase == code
        parts[name] = {
            "seconds": float((draw_seconds - fit_seconds)[mine].sum()),
            "draws": int(mine.sum()),
            "logps": float(logps[mine].sum()),
            "gradients": float(gradients[mine].sum()),
        }
    parts["fits"] = {"seconds": float(sum(s for _, s in fits)), "count": len(fits)}
    kept_logps, kept_gradients = evaluations(kept, run.backend)
    parts["kept draws"] = {
        "seconds": float(_stat(kept, "perf_counter_diff").sum()),
        "draws": int(kept_logps.size),
        "logps": float(kept_logps.sum()),
        "gradients": float(kept_gradients.sum()),
    }
    inside = draw_seconds.sum() + parts["kept draws"]["seconds"]
    parts["outside the draws"] = {"seconds": float(run.whole_call_seconds - inside)}
    return parts


def measure(run: SamplerRun, fits: list, args) -> dict:
    """One run's row: the package's comparison table, the call's parts, the trajectories."""
    table = comparison_table({run.name: run}).loc[run.name]
    kept, step = run.trace.sample_stats, run.step
    surrogate_draws = _stat(kept, "used_surrogate", 0.0).astype(bool)
    row = {
        "whole call s": run.whole_call_seconds,
        "bulk ESS / draw": table["min bulk ESS"] / args.draws,
        "tail ESS / draw": table["min tail ESS"] / args.draws,
        "logps to ESS 1000": table["logps to ESS 1000"],
        "parts": breakdown(run, fits) if run.backend != "nutpie" else {},
        "accept": table["accept"],
        "steps / surrogate draw": float(_stat(kept, "n_steps")[surrogate_draws].mean())
        if surrogate_draws.any()
        else None,
    }
    if step is not None and step.surrogate is not None:
        best = step.trajectory_choice.best
        row |= {
            "fit": fit_summary(step.surrogate),
            "held-out gradient error": float(held_out_error(step.surrogate)),
            "metric": best.metric.kind,
            "step size": float(step.kernel.step_size),
            "path length": float(best.path_length),
        }
    return row


COLUMNS = (
    "workload",
    "d",
    "sampler",
    "seed",
    "whole call s",
    "exploring s",
    "fits s",
    "surrogate tuning s",
    "alone s",
    "net tuning s",
    "kept draws s",
    "outside s",
    "bulk ESS / draw",
    "tail ESS / draw",
    "logps to ESS 1000",
    "steps / surrogate draw",
    "held-out gradient error",
)


def _cells(row: dict) -> list[str]:
    parts = row["parts"]
    named = {
        "exploring s": ("exploring",),
        "fits s": ("fits",),
        "surrogate tuning s": ("surrogate tuning",),
        "alone s": ("surrogate alone",),
        "net tuning s": ("net tuning",),
        "kept draws s": ("kept draws",),
        "outside s": ("outside the draws",),
    }
    values = {
        column: sum(parts[name]["seconds"] for name in names) if parts else None
        for column, names in named.items()
    }
    cells = []
    for column in COLUMNS:
        value = workload_of(row) if column == "workload" else values.get(column, row.get(column))
        if isinstance(value, float):
            cells.append(f"{value:.3g}")
        else:
            cells.append("-" if value is None else str(value))
    return cells


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"## Wide models, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; tune {meta['tune']}, draws {meta['draws']}, one "
        "chain per run. Columns: see the docstring of `benchmarks/wide_models.py`.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


PLOTTED = ("RNSHMC", "RNSHMC from jitter", "nutpie low-rank", "nutpie", "NUTS dense", "NUTS")
"""Samplers drawn by :func:`plot`, where the result files have them."""


def plot(names: list[str], figure: str) -> None:
    """Whole-call tail ESS per second against ``d`` (medians over seeds), and RNSHMC's ratio to
    the strongest baseline of each width and seed (:func:`benchmarks.results_table.comparisons`),
    from the result files ``names``; a width in a later file replaces its runs in earlier ones
    (:func:`benchmarks.results_table.newest_runs`). The logistic regression's ratios, and the
    hierarchical model's, where the verdict gave the surrogate up for exact NUTS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [run for _, _, file_runs in results_table.newest_runs(names) for run in file_runs]
    logistic = [r for r in runs if r.workload == "logistic"]
    fig, (speed, ratio) = plt.subplots(1, 2, figsize=(12, 4))
    _plot_speed(speed, logistic)
    for workload, colour, note in (
        ("logistic", "C0", "logistic"),
        ("hierarchical", "C3", "hierarchical (given up: exact NUTS)"),
    ):
        found = _ratios([r for r in runs if r.workload == workload])
        for kind, marker in (("bulk", "o"), ("tail", "s")):
            if found:
                points = [(d, c.ratios[kind]) for d, c in found]
                ratio.plot(*zip(*points), marker, color=colour, label=f"{note}, {kind} ESS")
    ratio.axhline(1.0, color="grey", lw=0.8)
    ratio.plot([80, 160], [5, 3], "k_", markersize=18, label="the issue's targets")
    ratio.set(
        xscale="log", xlabel="parameters d", ylabel="RNSHMC / strongest baseline", ylim=(0, None)
    )
    ratio.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    for axis, shown in ((speed, logistic), (ratio, runs)):
        widths = sorted({r.d for r in shown if r.d is not None})
        axis.set_xticks(widths, [str(d) for d in widths], fontsize=7)
        axis.minorticks_off()
    fig.suptitle("Wide models, 1000 + 1000 draws, one chain (PyMC 6)")
    fig.tight_layout()
    fig.savefig(figure, dpi=110)


def _plot_speed(axis, runs: list) -> None:
    """Each sampler's median whole-call tail ESS per second against ``d``."""
    widths = sorted({r.d for r in runs})
    for sampler in PLOTTED:
        dims = [d for d in widths if any(r.sampler == sampler and r.d == d for r in runs)]
        tail = [
            np.median([r.per_second("tail") for r in runs if r.sampler == sampler and r.d == d])
            for d in dims
        ]
        if dims:
            axis.plot(dims, tail, "o-", label=sampler)
    axis.set(xscale="log", yscale="log", xlabel="parameters d", ylabel="tail ESS / s, whole call")
    axis.set_title("correlated logistic regression", fontsize=9)
    axis.legend(fontsize=8)


def _ratios(runs: list) -> list:
    """``(d, comparison)`` for each width and seed of ``runs`` (one workload)."""
    widths = sorted({r.d for r in runs})
    by_width = {d: [r for r in runs if r.d == d] for d in widths}
    return [(d, found) for d in widths for found in results_table.comparisons(by_width[d])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="20,40,80,160,320")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--samplers", default="RNSHMC,NUTS dense")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--workload", default="logistic", choices=sorted(WORKLOADS))
    parser.add_argument("--output", default="wide_models")
    parser.add_argument("--plot", help="result files to draw (comma-separated), no runs")
    parser.add_argument("--figure", default="docs/figures/wide-models-scaling.png")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot.split(","), args.figure)
        return
    meta = run_metadata(**vars(args))
    rows = []
    for width in (int(d) for d in args.dims.split(",")):
        model = WORKLOADS[args.workload](width)
        dim = sum(int(np.size(value)) for value in model.initial_point().values())
        for seed in (int(s) for s in args.seeds.split(",")):
            for sampler in args.samplers.split(","):
                run, fits = sample(model, sampler, args, seed)
                row = {"workload": args.workload, "d": dim, "sampler": sampler, "seed": seed}
                row |= measure(run, fits, args)
                rows.append(row)
                print(" | ".join(_cells(row)), flush=True)
                write_results(args.output, {**meta, "runs": rows}, markdown(rows, meta))


if __name__ == "__main__":
    main()
