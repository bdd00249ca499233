"""PyMC NUTS, nutpie and RNSHMC in one run on the papers' workloads.

    python -m benchmarks.run_benchmarks                       # both workloads, paper sizes
    python -m benchmarks.run_benchmarks --workloads banana --draws 2000
    python -m benchmarks.run_benchmarks --n-obs 10000 --profile

Writes ``benchmarks/results/<workload>.json`` and ``benchmarks/results/<workload>.md``. BLAS is
pinned to one thread (a multithreaded BLAS made one logp 25 times slower on these machines).
Times are wall-clock seconds; "draws" is the sampling phase after tuning (PyMC's per-draw
``perf_counter_diff``; for nutpie its loop time apportioned by gradient evaluations).
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

from benchmarks.measure import (
    evaluation_costs,
    mean_agreement,
    run_nutpie,
    run_pymc,
)
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.workloads import banana, logistic_regression

RESULTS = Path(__file__).parent / "results"


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
        "PyMC NUTS": lambda: run_pymc(
            model, pm.NUTS, args.tune, args.draws, args.chains, args.seed
        ),
        "nutpie": lambda: run_nutpie(model, args.tune, args.draws, args.chains, args.seed),
        "RNSHMC": lambda: run_pymc(
            model, RNSHMC, args.tune, args.draws, args.chains, args.seed, profile=args.profile
        ),
    }
    results, posteriors = {}, {}
    for name in args.samplers.split(","):
        idata, result = samplers[name]()
        posteriors[name] = idata.posterior
        draws = args.draws * args.chains
        result["seconds_per_draw"] = result["sampling_seconds"] / draws
        result["draw_cost_in_logps"] = result["seconds_per_draw"] / costs["logp_seconds"]
        result["bulk_ess_per_second"] = result["min_bulk_ess"] / result["sampling_seconds"]
        result["bulk_ess_per_second_whole_call"] = result["min_bulk_ess"] / result["wall_seconds"]
        results[name] = result
        print(f"{name}: {summary_line(result)}", flush=True)
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
        if "PyMC NUTS" in results and name != "PyMC NUTS":
            results[name]["max_mean_difference_mcse"] = mean_agreement(
                posteriors["PyMC NUTS"], posteriors[name]
            )
    return {
        "workload": workload,
        "n_obs": args.n_obs if workload == "logistic_regression" else 100,
        "tune": args.tune,
        "draws": args.draws,
        "chains": args.chains,
        "seed": args.seed,
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
    ("wall s", "wall_seconds", "{:.1f}"),
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
        f"{report['draws']}, chains {report['chains']}, seed {report['seed']}; one logp "
        f"{report['costs']['logp_seconds'] * 1e3:.3f} ms, logp+grad "
        f"{report['costs']['logp_gradient_seconds'] * 1e3:.3f} ms.",
        "",
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
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
    if "profile" in rns:
        lines += ["", "```", rns["profile"].strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="logistic_regression,banana")
    parser.add_argument("--samplers", default="PyMC NUTS,nutpie,RNSHMC")
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
