"""The whole ``pm.sample`` call: PyMC's NUTS, nutpie and the surrogate samplers, per workload.

    python -m benchmarks.whole_call                            # every workload and sampler
    python -m benchmarks.whole_call --workloads banana,ode --tune 150 --draws 100 \\
        --target-ess 50 --output smoke_whole_call              # smoke run, seconds
    python -m benchmarks.whole_call --workloads banana --chains 4 --cores 2

Writes ``benchmarks/results/<output>.{json,md}`` (``--output``, default ``whole_call``) after
every workload. BLAS is pinned to one thread. Every sampler runs with the same ``--seed``,
``--tune``, ``--draws``, ``--chains`` and ``--cores``; one that raises is recorded with its
error and the run goes on.

Samplers (``--samplers``): "NUTS" (PyMC's NUTS, ``pm.sample(nuts_sampler="pymc")`` with its
default ``jitter+adapt_diag``), "NUTS dense" (``init="jitter+adapt_full"``), "nutpie" and
"nutpie low-rank" (``adaptation="low_rank"``, nutpie's low-rank modified mass matrix), "RNSHMC"
(defaults), "RNSHMC nuts" (``dynamics="nuts"``: NUTS trees on the surrogate corrected by
delayed acceptance), "RNSHMC explored" (``exploration_steps=round(0.7 * tune)``, a fully explored
surrogate: the reference the fast default must not quietly fall short of), "RNSHMC no net"
(``safety_net=0``: what the default's exact component costs) and "ARNSHMC" (defaults). The
first four are the baselines.

Workloads (``--workloads``): "logistic_regression" (d = 50, N = 100 000), "pde_30" and "pde_60"
(the RNS-HMC paper's d = 20 elliptic PDE on 30 x 30 and 60 x 60 meshes), "ode" (Lotka-Volterra
through ``pm.ode``, d = 7), "banana" (d = 2) and "gaussian_process" (d = 3, N = 200).

The measurements are :func:`pymc_rnshmc.comparison.comparison_table`'s (the package's ESS,
evaluations per draw, acceptance, divergences and mean differences); the clock, the timelines,
the time to the target ESS and the draws' wall time are this script's.

Clock: seconds since the start of the call. For PyMC's samplers the clock starts before the
step is constructed (the surrogate steps compile the model there; NUTS is built inside
``pm.sample``), for nutpie before ``nutpie.compile_pymc_model``. Draw times come from PyMC's
per-draw ``perf_counter_start`` and ``perf_counter_diff`` (also across worker processes: the
clock is system-wide) and, for nutpie, which records none, from the draw counts its progress
callback reports every 50 ms, spread between reports by leapfrog steps.

Rows of each workload's table (one column per sampler):

* s to target ESS: when the post-tuning draws first reach a min bulk ESS (ArviZ, over every
  coordinate) of ``--target-ess``, checked every 25 draws; "not reached" if they never do.
  With several chains the check comes every 25 draws of all chains pooled in time order, and
  the ESS is ArviZ's multi-chain one of the draws finished by then, for the best number ``k``
  of the chains furthest on, each cut to the ``k``-th one's length (both PyMC and nutpie run
  ``cores`` chains at a time; see :func:`benchmarks.convergence.pooled_time_to_ess`).
* s to target ESS, extrapolated: when not reached, the call's time before the post-tuning
  draws plus their wall time times ``target / ESS at the end``.
* draws to target ESS: post-tuning draws (all chains) at that point.
* whole call s: wall seconds of the call; draws s: wall seconds of the post-tuning draws (each
  chain's span from its last tuning draw to its last draw, summed and divided by
  ``min(chains, cores)``).
* setup s and share: the step's ``setup_seconds`` after the call (surrogate fit and choice of
  the dynamics; the last chain's when one process ran several chains; not observable when
  chains ran in worker processes) and its share of the whole call.
* min bulk ESS, min tail ESS (ArviZ, all chains), and each per post-tuning draw (all chains).
* bulk ESS/s draws and whole call: min bulk ESS over draws s and over whole call s.
* logps / draw, gradients / draw: exact model evaluations per post-tuning draw (the steps'
  ``n_logp_evals``/``n_gradient_evals``, else ``n_steps + 1`` for PyMC's NUTS, ``n_steps`` for
  nutpie).
* accept: mean acceptance statistic after tuning; divergences after tuning.
* max mean diff (MCSE): the largest difference of posterior means from the strongest baseline,
  in combined Monte Carlo standard errors (over the variables both report).

The strongest baseline is the baseline that ran with the shortest time to the target ESS
(extrapolated where not reached). The ratio table gives, for each surrogate sampler, against
every baseline and the strongest, the time-to-ESS speed-up (baseline's time over the
sampler's, > 1 is faster) and the ratio of whole-call bulk ESS/s (sampler's over baseline's);
and the min bulk ESS per draw of "RNSHMC" and "ARNSHMC" over that of "RNSHMC explored" (the
target is >= 0.7), and tail ESS per draw over the strongest baseline's.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import traceback
from functools import partial

from benchmarks.convergence import draw_wall_seconds, pooled_time_to_ess
from benchmarks.measure import evaluation_costs, measurements, run, run_metadata, write_results
from pymc_rnshmc import ARNSHMC, RNSHMC
from pymc_rnshmc.workloads import banana, gaussian_process, logistic_regression
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde
from pymc_rnshmc.workloads.ode import lotka_volterra

WORKLOADS = {
    "logistic_regression": (
        "logistic regression, d = 50, N = 100 000 (RNS-HMC paper 5.1)",
        lambda: logistic_regression(n_obs=100_000),
    ),
    "pde_30": (
        "elliptic PDE, d = 20, 30 x 30 mesh (RNS-HMC paper 5.2)",
        lambda: elliptic_pde(n_cells=30),
    ),
    "pde_60": (
        "elliptic PDE, d = 20, 60 x 60 mesh (RNS-HMC paper 5.2)",
        lambda: elliptic_pde(n_cells=60),
    ),
    "ode": ("Lotka-Volterra through pm.ode, d = 7", lotka_volterra),
    "banana": ("banana, d = 2 (sparse-grid HMC paper 4.2)", banana),
    "gaussian_process": (
        "Gaussian-process hyperparameters, d = 3, N = 200 (sparse-grid HMC paper 4.3)",
        gaussian_process,
    ),
}
BASELINES = ("NUTS", "NUTS dense", "nutpie", "nutpie low-rank")
SURROGATES = ("RNSHMC", "RNSHMC nuts", "RNSHMC explored", "RNSHMC no net", "ARNSHMC")
SAMPLERS = {
    "NUTS": lambda tune: "pymc",
    "NUTS dense": lambda tune: "pymc",
    "nutpie": lambda tune: "nutpie",
    "nutpie low-rank": lambda tune: "nutpie",
    "RNSHMC": lambda tune: RNSHMC,
    "RNSHMC nuts": lambda tune: partial(RNSHMC, dynamics="nuts"),
    "RNSHMC explored": lambda tune: partial(RNSHMC, exploration_steps=max(1, round(0.7 * tune))),
    "RNSHMC no net": lambda tune: partial(RNSHMC, safety_net=0.0),
    "ARNSHMC": lambda tune: ARNSHMC,
}
"""Each sampler as :func:`pymc_rnshmc.comparison.run_sampler` takes it, given the tuning length
(only "RNSHMC explored" depends on it)."""
OPTIONS = {
    "NUTS dense": {"init": "jitter+adapt_full"},
    "nutpie low-rank": {"adaptation": "low_rank"},
}


def run_one(name: str, model, args) -> tuple:
    """One sampler's ``pm.sample`` (or nutpie) call and its raw measurements."""
    sampled, result = run(
        model,
        name,
        SAMPLERS[name](args.tune),
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        seed=args.seed,
        cores=args.cores,
        chain_timelines=True,
        **OPTIONS.get(name, {}),
    )
    result["setup_seconds"] = setup_seconds(sampled.step, args)
    return sampled, result


def setup_seconds(step, args) -> float | None:
    """The step's ``setup_seconds``, unless its chains ran in worker processes (or it has none)."""
    if step is None or (args.chains > 1 and args.cores > 1):
        return None
    return getattr(step, "setup_seconds", None)


def summarize(result: dict, posterior, args) -> dict:
    """The whole-call quantities of one run, added to its raw measurements."""
    timelines = result.pop("timeline")
    result.pop("ess_per_second", None)  # from summed per-draw times; here: draw_seconds
    parallel = min(args.chains, args.cores)
    n_draws = args.draws * args.chains
    reached = pooled_time_to_ess(posterior, timelines, args.target_ess, parallel)
    draw_seconds = draw_wall_seconds(timelines, args.draws, parallel)
    setup = result.get("setup_seconds")
    result.update(
        time_to_ess=reached,
        time_to_ess_seconds=reached["seconds"] if reached["reached"] else None,
        time_to_ess_extrapolated_seconds=reached.get("extrapolated_seconds"),
        time_to_ess_draws=reached.get("pooled_draws"),
        effective_time_to_ess=reached.get("seconds", reached.get("extrapolated_seconds")),
        draw_seconds=draw_seconds,
        setup_share=None if setup is None else setup / result["wall_seconds"],
        bulk_ess_per_draw=result["min_bulk_ess"] / n_draws,
        tail_ess_per_draw=result["min_tail_ess"] / n_draws,
        ess_per_second_draws=result["min_bulk_ess"] / draw_seconds,
        ess_per_second_whole_call=result["min_bulk_ess"] / result["wall_seconds"],
    )
    return result


def strongest_baseline(results: dict) -> str | None:
    """The baseline that ran with the shortest (possibly extrapolated) time to the target ESS."""
    timed = {
        name: results[name]["effective_time_to_ess"]
        for name in BASELINES
        if name in results and results[name].get("effective_time_to_ess") is not None
    }
    return min(timed, key=timed.get) if timed else None


def ratio(numerator, denominator) -> float | None:
    """``numerator / denominator``, or None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def surrogate_ratios(results: dict, strongest: str | None) -> dict:
    """Speed-ups of each surrogate sampler over every baseline and the strongest one."""
    baselines = [b for b in BASELINES if b in results and "error" not in results[b]]
    explored = results.get("RNSHMC explored", {})
    ratios = {}
    for name in SURROGATES:
        mine = results.get(name, {})
        if "error" in mine or not mine:
            continue
        ratios[name] = {}
        for base in baselines + ([f"strongest ({strongest})"] if strongest else []):
            theirs = results[strongest if base.startswith("strongest") else base]
            ratios[name][base] = {
                "time_to_ess_speedup": ratio(
                    theirs["effective_time_to_ess"], mine["effective_time_to_ess"]
                ),
                "whole_call_ess_per_second_ratio": ratio(
                    mine["ess_per_second_whole_call"], theirs["ess_per_second_whole_call"]
                ),
            }
        if name != "RNSHMC explored" and "bulk_ess_per_draw" in explored:
            ratios[name]["bulk_ess_per_draw_vs_explored"] = ratio(
                mine["bulk_ess_per_draw"], explored["bulk_ess_per_draw"]
            )
        if strongest:
            ratios[name]["tail_ess_per_draw_vs_strongest"] = ratio(
                mine["tail_ess_per_draw"], results[strongest]["tail_ess_per_draw"]
            )
    return ratios


def run_workload(workload: str, args) -> dict:
    """Every sampler on one workload: costs, per-sampler results, the strongest baseline."""
    label, build = WORKLOADS[workload]
    model = build()
    costs = evaluation_costs(model)
    print(
        f"\n== {workload}: logp {costs['logp_seconds'] * 1e3:.3f} ms, "
        f"logp+grad {costs['logp_gradient_seconds'] * 1e3:.3f} ms",
        flush=True,
    )
    results, runs = {}, {}
    for name in args.samplers.split(","):
        try:
            runs[name], raw = run_one(name, model, args)
            results[name] = summarize(raw, runs[name].trace.posterior, args)
        except Exception as err:  # one sampler's failure must not end the run
            traceback.print_exc()
            results[name] = {"error": f"{type(err).__name__}: {err}"}
        print(f"{name}: {summary_line(results[name])}", flush=True)
    strongest = strongest_baseline(results)
    if strongest:
        for name, measured in measurements(runs, strongest).items():
            if "max_mean_difference_mcse" in measured:
                results[name]["max_mean_difference_mcse"] = measured["max_mean_difference_mcse"]
    return {
        "workload": workload,
        "label": label,
        "costs": costs,
        "strongest_baseline": strongest,
        "results": results,
        "ratios": surrogate_ratios(results, strongest),
    }


def summary_line(result: dict) -> str:
    """One progress line of a sampler's result."""
    if "error" in result:
        return f"error {result['error']}"
    reached = f"{time_cell(result)} s"
    if not result["time_to_ess"]["reached"]:
        extrapolated = fmt(result["time_to_ess_extrapolated_seconds"], ".1f")
        reached = f"not reached (extrapolated {extrapolated} s)"
    return (
        f"to target ESS {reached}, whole call {result['wall_seconds']:.1f} s, min bulk ESS "
        f"{result['min_bulk_ess']:.0f}, tail {result['min_tail_ess']:.0f}, "
        f"accept {result['accept']:.2f}"
    )


def fmt(value, spec: str) -> str:
    """``value`` formatted by ``spec``, or "-" when missing."""
    return "-" if value is None else format(value, spec)


ROWS = [
    ("s to target ESS, extrapolated", "time_to_ess_extrapolated_seconds", ".1f"),
    ("draws to target ESS", "time_to_ess_draws", "d"),
    ("whole call s", "wall_seconds", ".1f"),
    ("draws s", "draw_seconds", ".1f"),
    ("setup s", "setup_seconds", ".2f"),
    ("setup share of call", "setup_share", ".1%"),
    ("min bulk ESS", "min_bulk_ess", ".0f"),
    ("min tail ESS", "min_tail_ess", ".0f"),
    ("bulk ESS / draw", "bulk_ess_per_draw", ".3f"),
    ("tail ESS / draw", "tail_ess_per_draw", ".3f"),
    ("bulk ESS/s draws", "ess_per_second_draws", ".2f"),
    ("bulk ESS/s whole call", "ess_per_second_whole_call", ".2f"),
    ("logps / draw", "logps_per_draw", ".2f"),
    ("gradients / draw", "gradients_per_draw", ".2f"),
    ("accept", "accept", ".2f"),
    ("divergences", "divergences", "d"),
    ("max mean diff (MCSE)", "max_mean_difference_mcse", ".2f"),
]


def time_cell(result: dict) -> str:
    """The time-to-target-ESS cell: seconds, "not reached" or the sampler's error."""
    if "error" in result:
        return "error"
    if not result["time_to_ess"]["reached"]:
        return "not reached"
    return fmt(result["time_to_ess_seconds"], ".1f")


def sampler_table(report: dict, target: float) -> list[str]:
    """Rows = quantities, columns = samplers."""
    results = report["results"]
    names = list(results)
    lines = [
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        f"| s to min bulk ESS {target:g} | "
        + " | ".join(time_cell(results[n]) for n in names)
        + " |",
    ]
    for label, key, spec in ROWS:
        cells = [fmt(results[n].get(key), spec) for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def ratio_table(report: dict) -> list[str]:
    """Rows = surrogate samplers; cells "time-to-ESS speed-up / whole-call ESS/s ratio"."""
    ratios = report["ratios"]
    if not ratios:
        return []
    first = next(iter(ratios.values()))
    columns = [key for key, value in first.items() if isinstance(value, dict)]
    lines = [
        "",
        "Speed-ups (time to target ESS, baseline's over sampler's / whole-call bulk ESS/s, "
        "sampler's over baseline's):",
        "",
        "| | "
        + " | ".join(columns)
        + " | bulk ESS/draw vs explored | tail ESS/draw vs strongest |",
        "|---|" + "---|" * (len(columns) + 2),
    ]
    for name, row in ratios.items():
        cells = [
            f"{fmt(row[c]['time_to_ess_speedup'], '.2f')} / "
            f"{fmt(row[c]['whole_call_ess_per_second_ratio'], '.2f')}"
            for c in columns
        ]
        cells += [
            fmt(row.get("bulk_ess_per_draw_vs_explored"), ".2f"),
            fmt(row.get("tail_ess_per_draw_vs_strongest"), ".2f"),
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def workload_markdown(report: dict, target: float) -> list[str]:
    """The section of one workload."""
    if "error" in report:
        return [f"### {report['workload']}", "", f"Error: {report['error']}", ""]
    costs = report["costs"]
    lines = [
        f"### {report['workload']}: {report['label']}",
        "",
        f"One logp {costs['logp_seconds'] * 1e3:.3f} ms, one logp+gradient "
        f"{costs['logp_gradient_seconds'] * 1e3:.3f} ms; strongest baseline: "
        f"{report['strongest_baseline']}.",
        "",
    ]
    lines += sampler_table(report, target) + ratio_table(report)
    errors = [(n, r["error"]) for n, r in report["results"].items() if "error" in r]
    lines += [""] + [f"- {name} failed: {error}" for name, error in errors]
    return [*lines, ""]


def markdown(reports: list, meta: dict) -> str:
    """All workloads' tables under the run's metadata."""
    lines = [
        f"## Whole pm.sample call, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; tune {meta['tune']}, draws {meta['draws']}, "
        f"chains {meta['chains']}, cores {meta['cores']}, seed {meta['seed']}; target min bulk "
        f"ESS {meta['target_ess']:g}. Columns and rows: see the docstring of "
        "`benchmarks/whole_call.py`.",
        "",
    ]
    for report in reports:
        lines += workload_markdown(report, meta["target_ess"])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--samplers", default=",".join(BASELINES + SURROGATES))
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target-ess", type=float, default=1000.0)
    parser.add_argument("--output", default="whole_call", help="result file stem")
    args = parser.parse_args()
    for given, known in ((args.samplers, BASELINES + SURROGATES), (args.workloads, WORKLOADS)):
        unknown = set(given.split(",")) - set(known)
        if unknown:
            parser.error(f"unknown {sorted(unknown)}; choose from {list(known)}")
    meta = run_metadata(
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        cores=args.cores,
        seed=args.seed,
        target_ess=args.target_ess,
        samplers=args.samplers.split(","),
    )
    reports = []
    for workload in args.workloads.split(","):
        try:
            reports.append(run_workload(workload, args))
        except Exception as err:  # e.g. a workload that fails to build
            traceback.print_exc()
            reports.append({"workload": workload, "error": f"{type(err).__name__}: {err}"})
        text = markdown(reports, meta)
        write_results(args.output, meta | {"reports": reports}, text)
    print(text)


if __name__ == "__main__":
    main()
