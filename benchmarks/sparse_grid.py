"""PyMC NUTS and SparseGridHMC in one run on the sparse-grid HMC paper's workloads.

    python -m benchmarks.sparse_grid                          # three workloads, ~5 min
    python -m benchmarks.sparse_grid --workloads banana --draws 1000

Workloads (``pymc_rnshmc.workloads``): the two-parameter logistic regression (section 4.1, N=100),
the banana (4.2) and the Gaussian-process hyperparameters (4.3, three parameters). As in the
paper, one chain of 3200 draws after 800 tuning draws. On the two-parameter workloads the paper
ran naive grid HMC (its Tables 4.1 and 4.2): ``SparseGridHMC(grid="full")`` with 80 x 80 cells,
the paper's banana grid, runs next to the default sparse grid. Reported per sampler: min bulk ESS,
acceptance, seconds per draw after tuning, min bulk ESS per second of the draws and of the whole
``pm.sample`` call (its clock started before the step is built; for SparseGridHMC it includes the
exploration, the Laplace fit and the grid precomputation), and the speed-ups over NUTS next to
the paper's over its hand-tuned HMC (the measurements of :mod:`pymc_rnshmc.comparison`).
Writes ``benchmarks/results/sparse_grid.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse
import functools

import pymc as pm

from benchmarks.measure import (
    compare_with_nuts,
    evaluation_costs,
    run,
    run_metadata,
    write_results,
)
from pymc_rnshmc import SparseGridHMC
from pymc_rnshmc.workloads import banana, gaussian_process, small_logistic_regression

FULL_GRID = {"grid": "full", "max_points": 6400}
WORKLOADS = {
    "small_logistic_regression": (small_logistic_regression, 2.1, {"full grid": FULL_GRID}),
    "banana": (banana, 1.7, {"full grid": FULL_GRID}),
    "gaussian_process": (gaussian_process, 6.4, {}),
}
"""Model builder, the paper's speed-up of (sparse-)grid HMC over HMC (Tables 4.1-4.3), and the
SparseGridHMC variants run besides the default."""


def run_workload(name: str, args) -> dict:
    build, paper_speedup, variants = WORKLOADS[name]
    model = build()
    costs = evaluation_costs(model)
    print(f"\n== {name}: logp {costs['logp_seconds'] * 1e3:.3f} ms", flush=True)
    results, runs = {}, {}
    samplers = [("PyMC NUTS", pm.NUTS), ("SparseGridHMC", SparseGridHMC)]
    samplers += [
        (f"SparseGridHMC {label}", functools.partial(SparseGridHMC, **options))
        for label, options in variants.items()
    ]
    for sampler, factory in samplers:
        runs[sampler], result = run(
            model, sampler, factory, tune=args.tune, draws=args.draws, chains=1, seed=args.seed
        )
        result.pop("timeline", None)
        result["seconds_per_draw"] = result["sampling_seconds"] / args.draws
        stats = runs[sampler].trace.sample_stats
        if "steps_outside_domain" in stats:
            result["steps_outside_per_draw"] = float(stats["steps_outside_domain"].mean())
        results[sampler] = result
        print(
            f"{sampler}: min bulk ESS {result['min_bulk_ess']:.0f}, accept {result['accept']:.2f},"
            f" {result['ess_per_second']:.1f} ESS/s of draws, wall {result['wall_seconds']:.1f} s",
            flush=True,
        )
    compare_with_nuts(results, runs)
    return {"workload": name, "paper_speedup": paper_speedup, "costs": costs, "results": results}


def markdown(reports: list, meta: dict) -> str:
    lines = [
        f"### Sparse-grid workloads, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; tune {meta['tune']}, draws {meta['draws']}, one "
        f"chain, seed {meta['seed']}.",
        "",
        "| workload | sampler | min bulk ESS | accept | s/draw | ESS/s draws | ESS/s whole call | "
        "x NUTS draws | x NUTS whole call | paper x HMC | grid points | box | setup s | "
        "steps outside / draw | max mean diff (MCSE) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        for sampler, result in report["results"].items():
            grid = sampler != "PyMC NUTS"
            cells = [
                report["workload"],
                sampler,
                f"{result['min_bulk_ess']:.0f}",
                f"{result['accept']:.2f}",
                f"{result['seconds_per_draw']:.2e}",
                f"{result['ess_per_second']:.1f}",
                f"{result['ess_per_second_whole_call']:.1f}",
                f"{result['speedup_draws']:.1f}" if grid else "",
                f"{result['speedup_whole_call']:.1f}" if grid else "",
                f"{report['paper_speedup']:.1f}" if grid else "",
                str(result.get("grid_points", "")),
                result.get("grid_domain", ""),
                f"{result['setup_seconds']:.2f}" if grid else "",
                f"{result.get('steps_outside_per_draw', 0):.2f}" if grid else "",
                f"{result['max_mean_difference_mcse']:.2f}" if grid else "",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--tune", type=int, default=800)
    parser.add_argument("--draws", type=int, default=3200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    reports = [run_workload(name, args) for name in args.workloads.split(",")]
    meta = run_metadata(tune=args.tune, draws=args.draws, seed=args.seed)
    text = markdown(reports, meta)
    write_results("sparse_grid", meta | {"reports": reports}, text)
    print(text)


if __name__ == "__main__":
    main()
