"""Where sparse-grid HMC stops paying off: logistic regression with N = 1e5, d = 2 to 40.

    python -m benchmarks.sparse_grid_dimensions                    # ~25 min
    python -m benchmarks.sparse_grid_dimensions --dims 2,10 --draws 500

The sparse-grid HMC paper's Figure 4.5: the RNS-HMC paper's simulated logistic regression
(``pymc_rnshmc.workloads.logistic_regression``) with N = 100 000 observations at increasing
dimension, PyMC NUTS against ``SparseGridHMC`` in the same run, one chain each. Two grid variants:
the default, which interpolates the departure of the potential from the Laplace quadratic, and
``quadratic_base=False``, which interpolates the potential itself as the paper does. Both choose
the highest Smolyak level with at most 2000 points, so the grid gets coarser as ``d`` grows.
Writes ``benchmarks/results/sparse_grid_dimensions.{json,md}`` and
``docs/figures/sparse-grid-dimensions.png``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse
import functools
from pathlib import Path

import pymc as pm

from benchmarks.measure import (
    compare_with_nuts,
    evaluation_costs,
    run,
    run_metadata,
    write_results,
)
from pymc_rnshmc import SparseGridHMC
from pymc_rnshmc.workloads import logistic_regression

FIGURES = Path(__file__).parent.parent / "docs" / "figures"
SAMPLERS = {
    "PyMC NUTS": pm.NUTS,
    "SparseGridHMC": SparseGridHMC,
    "SparseGridHMC, no quadratic base": functools.partial(SparseGridHMC, quadratic_base=False),
}


def run_dimension(dim: int, args) -> dict:
    model = logistic_regression(n_obs=args.n_obs, dim=dim)
    costs = evaluation_costs(model, repeats=50)
    print(f"\n== d = {dim}: logp {costs['logp_seconds'] * 1e3:.2f} ms", flush=True)
    results, runs = {}, {}
    for sampler, factory in SAMPLERS.items():
        runs[sampler], result = run(
            model, sampler, factory, tune=args.tune, draws=args.draws, chains=1, seed=args.seed
        )
        result.pop("timeline", None)
        results[sampler] = result
        print(
            f"{sampler}: min bulk ESS {result['min_bulk_ess']:.0f}, accept {result['accept']:.2f}"
            f", {result['ess_per_second']:.2f} ESS/s of draws, wall {result['wall_seconds']:.0f} s"
            f", grid {result.get('grid_points', '-')} points (level {result.get('grid_level')})",
            flush=True,
        )
    compare_with_nuts(results, runs)
    return {"dim": dim, "costs": costs, "results": results}


def markdown(reports: list, meta: dict) -> str:
    lines = [
        f"### Sparse-grid HMC against dimension, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; logistic regression N = {meta['n_obs']}; tune "
        f"{meta['tune']}, draws {meta['draws']}, one chain, seed {meta['seed']}.",
        "",
        "| d | sampler | grid points (level) | accept | min bulk ESS | ESS/s draws | "
        "ESS/s whole call | x NUTS draws | x NUTS whole call | max mean diff (MCSE) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        for sampler, result in report["results"].items():
            grid = sampler != "PyMC NUTS"
            cells = [
                str(report["dim"]),
                sampler,
                f"{result['grid_points']} ({result['grid_level']})" if grid else "",
                f"{result['accept']:.2f}",
                f"{result['min_bulk_ess']:.0f}",
                f"{result['ess_per_second']:.2f}",
                f"{result['ess_per_second_whole_call']:.2f}",
                f"{result['speedup_draws']:.2f}" if grid else "",
                f"{result['speedup_whole_call']:.2f}" if grid else "",
                f"{result['max_mean_difference_mcse']:.2f}" if grid else "",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(reports: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = [report["dim"] for report in reports]
    figure, (accept_axis, speed_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for sampler in SAMPLERS:
        results = [report["results"][sampler] for report in reports]
        accept_axis.plot(dims, [r["accept"] for r in results], marker="o", label=sampler)
        speed_axis.plot(dims, [r["ess_per_second"] for r in results], marker="o", label=sampler)
    accept_axis.set(xlabel="dimension d", ylabel="acceptance", ylim=(0, 1.05))
    speed_axis.set(xlabel="dimension d", ylabel="min bulk ESS / s (draws)", yscale="log")
    speed_axis.legend()
    figure.suptitle("Logistic regression, N = 1e5 (sparse-grid HMC paper, Figure 4.5)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="2,5,10,20,30,40")
    parser.add_argument("--n-obs", type=int, default=100_000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    meta = run_metadata(n_obs=args.n_obs, tune=args.tune, draws=args.draws, seed=args.seed)
    reports = []
    for dim in args.dims.split(","):
        reports.append(run_dimension(int(dim), args))
        text = markdown(reports, meta)  # written after every dimension: a long run keeps its part
        write_results("sparse_grid_dimensions", meta | {"reports": reports}, text)
    plot(reports, FIGURES / "sparse-grid-dimensions.png")
    print(text)


if __name__ == "__main__":
    main()
