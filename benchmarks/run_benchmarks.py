"""PyMC NUTS, nutpie, RNSHMC and ARNSHMC in one run on the papers' workloads.

    python -m benchmarks.run_benchmarks                       # both workloads, paper sizes
    python -m benchmarks.run_benchmarks --workloads banana --draws 2000
    python -m benchmarks.run_benchmarks --n-obs 10000 --profile

Writes ``benchmarks/results/<workload>.json`` and ``benchmarks/results/<workload>.md``. BLAS is
pinned to one thread (a multithreaded BLAS made one logp 25 times slower on these machines).
The measurements are :func:`pymc_rnshmc.comparison.comparison_table`'s. Times are wall-clock
seconds; the whole call's clock starts before the step is built (nutpie: before its compile);
"draws" is the sampling phase after tuning (PyMC's per-draw ``perf_counter_diff``; for nutpie
its loop time apportioned by leapfrog steps).
ARNSHMC needs less tuning than the others and runs with ``--arnshmc-tune`` (500). For every
sampler the script also reports when its draws first reach a min bulk ESS of ``--target-ess``
(seconds since the start of the whole call), and plots the relative error of the posterior
mean against wall time and ARNSHMC's acceptance against its estimator's points
(``docs/figures/<workload>-*.png``).
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import datetime
import json
import platform
from pathlib import Path

import pymc as pm

from benchmarks.convergence import (
    acceptance_by_points,
    plot_acceptance,
    plot_relative_error,
    reference_means,
    relative_error_curve,
    time_to_ess,
)
from benchmarks.measure import evaluation_costs, measurements, run
from pymc_rnshmc import ARNSHMC, RNSHMC
from pymc_rnshmc.workloads import banana, logistic_regression

RESULTS = Path(__file__).parent / "results"
FIGURES = Path(__file__).parents[1] / "docs" / "figures"


def build(workload: str, n_obs: int):
    if workload == "logistic_regression":
        return logistic_regression(n_obs=n_obs)
    if workload == "banana":
        return banana()
    raise ValueError(workload)


def run_workload(workload: str, args) -> dict:
    model = build(workload, args.n_obs)
    costs = evaluation_costs(model)
    print(
        f"\n== {workload}: logp {costs['logp_seconds'] * 1e3:.3f} ms, "
        f"logp+grad {costs['logp_gradient_seconds'] * 1e3:.3f} ms",
        flush=True,
    )
    samplers = {
        "PyMC NUTS": (pm.NUTS, args.tune),
        "nutpie": ("nutpie", args.tune),
        "RNSHMC": (RNSHMC, args.tune),
        "ARNSHMC": (ARNSHMC, args.arnshmc_tune),
    }
    results, runs, timelines = {}, {}, {}
    for name in args.samplers.split(","):
        sampler, tune = samplers[name]
        runs[name], result = run(
            model,
            name,
            sampler,
            tune=tune,
            draws=args.draws,
            chains=args.chains,
            seed=args.seed,
            profile=args.profile and name == "RNSHMC",
        )
        timelines[name] = result.pop("timeline")
        result["tune"] = tune
        result["time_to_ess"] = time_to_ess(
            runs[name].trace.posterior, timelines[name], args.target_ess
        )
        draws = args.draws * args.chains
        result["seconds_per_draw"] = result["sampling_seconds"] / draws
        result["draw_cost_in_logps"] = result["seconds_per_draw"] / costs["logp_seconds"]
        result["bulk_ess_per_second"] = result.pop("ess_per_second")
        result["bulk_ess_per_second_whole_call"] = result.pop("ess_per_second_whole_call")
        results[name] = result
        print(f"{name}: {summary_line(result)}", flush=True)
    agreement = measurements(runs, "PyMC NUTS") if "PyMC NUTS" in runs else {}
    for name in results:
        for reference in ("PyMC NUTS", "nutpie"):
            if reference in results and name != reference:
                ratio = (
                    results[name]["bulk_ess_per_second"] / results[reference]["bulk_ess_per_second"]
                )
                whole = (
                    results[name]["bulk_ess_per_second_whole_call"]
                    / results[reference]["bulk_ess_per_second_whole_call"]
                )
                results[name][f"speedup_vs_{reference}"] = ratio
                results[name][f"whole_call_speedup_vs_{reference}"] = whole
        if "max_mean_difference_mcse" in agreement.get(name, {}):
            results[name]["max_mean_difference_mcse"] = agreement[name]["max_mean_difference_mcse"]
        for reference in ("PyMC NUTS", "RNSHMC"):
            if reference in results and name != reference:
                results[name][f"time_to_ess_speedup_vs_{reference}"] = (
                    results[reference]["time_to_ess"]["seconds"]
                    / results[name]["time_to_ess"]["seconds"]
                )
    posteriors = {name: sampled.trace.posterior for name, sampled in runs.items()}
    if args.chains == 1 and len(posteriors) > 1:
        FIGURES.mkdir(parents=True, exist_ok=True)
        reference = reference_means(posteriors)
        curves = {
            name: relative_error_curve(posteriors[name], timelines[name], reference)
            for name in posteriors
        }
        plot_relative_error(
            curves,
            FIGURES / f"{workload}-relative-error.png",
            f"{workload}: error of the posterior mean against wall time",
        )
        for name in curves:
            results[name]["final_relative_error"] = curves[name]["relative_error"][-1]
    if "ARNSHMC" in runs and args.chains == 1:
        curve = acceptance_by_points(runs["ARNSHMC"].trace)
        plot_acceptance(
            curve,
            FIGURES / f"{workload}-arnshmc-acceptance.png",
            f"{workload}: ARNSHMC acceptance as its estimator learns",
        )
        results["ARNSHMC"]["acceptance_first_50"] = curve["first_acceptance"]
        results["ARNSHMC"]["acceptance_last_50"] = curve["last_acceptance"]
    return {
        "workload": workload,
        "n_obs": args.n_obs if workload == "logistic_regression" else 100,
        "tune": args.tune,
        "draws": args.draws,
        "chains": args.chains,
        "seed": args.seed,
        "target_ess": args.target_ess,
        "costs": costs,
        "results": results,
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "pymc": pm.__version__,
    }


def summary_line(result: dict) -> str:
    return (
        f"min bulk ESS {result['min_bulk_ess']:.0f}, "
        f"{result['bulk_ess_per_second']:.1f}/s of draws, "
        f"{result['seconds_per_draw'] * 1e3:.2f} ms/draw "
        f"({result['draw_cost_in_logps']:.2f} logps), "
        f"accept {result['accept']:.2f}, wall {result['wall_seconds']:.1f} s"
    )


COLUMNS = [
    ("min bulk ESS", "min_bulk_ess", "{:.0f}"),
    ("median bulk ESS", "median_bulk_ess", "{:.0f}"),
    ("min tail ESS", "min_tail_ess", "{:.0f}"),
    ("accept", "accept", "{:.2f}"),
    ("mean steps", "mean_n_steps", "{:.1f}"),
    ("mean path length", "mean_integration_time", "{:.2f}"),
    ("grads/draw", "gradients_per_draw", "{:.1f}"),
    ("logps/draw", "logps_per_draw", "{:.2f}"),
    ("s/draw", "seconds_per_draw", "{:.2e}"),
    ("draw / logp", "draw_cost_in_logps", "{:.2f}"),
    ("bulk ESS/s (draws)", "bulk_ess_per_second", "{:.1f}"),
    ("bulk ESS/s (whole call)", "bulk_ess_per_second_whole_call", "{:.1f}"),
    ("tune", "tune", "{:d}"),
    ("wall s", "wall_seconds", "{:.1f}"),
    ("s to min bulk ESS target", "time_to_ess_seconds", "{:.1f}"),
    ("draws to min bulk ESS target", "time_to_ess_note", "{}"),
    ("x NUTS (time to ESS)", "time_to_ess_speedup_vs_PyMC NUTS", "{:.1f}"),
    ("x RNSHMC (time to ESS)", "time_to_ess_speedup_vs_RNSHMC", "{:.1f}"),
    ("final rel. error of mean", "final_relative_error", "{:.2e}"),
    ("surrogate refreshes after tuning", "surrogate_refreshes_after_tuning", "{:d}"),
    ("x NUTS (draws)", "speedup_vs_PyMC NUTS", "{:.1f}"),
    ("x nutpie (draws)", "speedup_vs_nutpie", "{:.1f}"),
    ("x NUTS (whole)", "whole_call_speedup_vs_PyMC NUTS", "{:.1f}"),
    ("x nutpie (whole)", "whole_call_speedup_vs_nutpie", "{:.1f}"),
    ("max mean diff (MCSE)", "max_mean_difference_mcse", "{:.2f}"),
]


def markdown(report: dict) -> str:
    names = list(report["results"])
    lines = [
        f"### {report['workload']} (N = {report['n_obs']}), {report['date']}",
        "",
        f"pymc {report['pymc']}; {report['machine']}; tune {report['tune']}, draws "
        f"{report['draws']}, chains {report['chains']}, seed {report['seed']}; ESS target "
        f"{report['target_ess']:.0f}; one logp "
        f"{report['costs']['logp_seconds'] * 1e3:.3f} ms, logp+grad "
        f"{report['costs']['logp_gradient_seconds'] * 1e3:.3f} ms.",
        "",
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for result in report["results"].values():
        reached = result.get("time_to_ess")
        if reached:
            flag = " (extrapolated)" if reached["extrapolated"] else ""
            result["time_to_ess_seconds"] = reached["seconds"]
            result["time_to_ess_note"] = f"{reached['draws']} draws{flag}"
    for label, key, fmt in COLUMNS:
        cells = [
            fmt.format(report["results"][n][key]) if key in report["results"][n] else "-"
            for n in names
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    rns = report["results"].get("RNSHMC", {})
    if "setup_seconds" in rns:
        lines += [
            "",
            f"RNSHMC surrogate: fit {rns['surrogate_fit_seconds']:.2f} s, fit plus trajectory "
            f"tuning {rns['setup_seconds']:.2f} s, against {rns['tuning_draw_seconds']:.1f} s of "
            f"tuning draws; held-out gradient error {rns['surrogate_gradient_error']:.2%}; "
            f"trajectories: {rns['trajectory']}.",
        ]
    adaptive = report["results"].get("ARNSHMC", {})
    if "acceptance_first_50" in adaptive:
        lines += [
            "",
            f"ARNSHMC: acceptance {adaptive['acceptance_first_50']:.2f} over its first 50 "
            f"surrogate draws, {adaptive['acceptance_last_50']:.2f} over its last 50; "
            f"{adaptive['estimator_points']} exact evaluations in its estimator at the end.",
        ]
    if "profile" in rns:
        lines += ["", "```", rns["profile"].strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="logistic_regression,banana")
    parser.add_argument("--samplers", default="PyMC NUTS,nutpie,RNSHMC,ARNSHMC")
    parser.add_argument("--arnshmc-tune", type=int, default=500)
    parser.add_argument("--target-ess", type=float, default=1000.0)
    parser.add_argument("--n-obs", type=int, default=100_000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile the RNSHMC run")
    parser.add_argument("--tag", default="", help="suffix of the result file names")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    for workload in args.workloads.split(","):
        report = run_workload(workload, args)
        stem = RESULTS / f"{workload}{args.tag}"
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2, default=float))
        stem.with_suffix(".md").write_text(markdown(report))
        print(markdown(report))


if __name__ == "__main__":
    main()
