"""Acceptance of ARNSHMC against the number of points its online estimator has learned from.

    python -m benchmarks.online_learning                      # d = 50, N = 10 000, ~2 min
    python -m benchmarks.online_learning --n-obs 100000

The RNS-HMC paper's Figure 7 isolates the online estimator: a surrogate started from few exact
evaluations and improved only by the online least-squares updates. So does this script: ARNSHMC
with a short exploration, no quality check before starting (a huge ``start_error``) and no batch
refits (``refit_during_tuning=False``), and the paper's surrogate (1000 random softplus units
fitted to values only, no quadratic base; ``--surrogate default`` for ARNSHMC's own), on the
paper's simulated logistic regression. It plots
the acceptance probability (moving average of 50 surrogate draws) against the estimator's points
(``docs/figures/online-learning-acceptance.png``) and writes
``benchmarks/results/online_learning.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse
import datetime
import json
import platform
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.convergence import acceptance_by_points, plot_acceptance
from pymc_rnshmc import ARNSHMC, RandomNetworkSurrogate
from pymc_rnshmc.workloads import logistic_regression

ROOT = Path(__file__).parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--exploration", type=int, default=80)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--surrogate",
        choices=["paper", "default"],
        default="paper",
        help="paper: values only, no quadratic base, 1000 hidden units (the paper's surrogate); "
        "default: ARNSHMC's own (quadratic base, values and gradients), nearly exact from the "
        "start on this posterior, so there is little to learn",
    )
    args = parser.parse_args()
    with logistic_regression(n_obs=args.n_obs, dim=args.dim):
        options = {}
        if args.surrogate == "paper":
            options = {
                "surrogate": RandomNetworkSurrogate(
                    n_hidden=1000, quadratic=False, gradient_weight=0.0, weight_scale=1.0
                ),
                "tuning_gradients": False,
            }
        step = ARNSHMC(
            exploration_steps=args.exploration,
            start_error=1e9,
            refit_during_tuning=False,
            **options,
        )
        idata = pm.sample(
            step=step,
            tune=args.tune,
            draws=args.draws,
            chains=1,
            random_seed=args.seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    curve = acceptance_by_points(idata)
    figure = ROOT / "docs" / "figures" / "online-learning-acceptance.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_acceptance(
        curve,
        figure,
        f"ARNSHMC, online updates only\nlogistic regression d={args.dim}, N={args.n_obs}"
        f", {args.surrogate} surrogate",
    )
    points, acceptance = np.array(curve["points"]), np.array(curve["acceptance"])
    milestones = [p for p in (100, 200, 500, 1000, 2000, 2500) if p <= points.max()]
    rows = [(p, float(acceptance[np.searchsorted(points, p)])) for p in milestones]
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "pymc": pm.__version__,
        "arguments": vars(args),
        "acceptance_at_points": rows,
        "first_acceptance": curve["first_acceptance"],
        "last_acceptance": curve["last_acceptance"],
        "refreshes": int(idata.sample_stats["surrogate_refreshes"].values[0, -1]),
    }
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "online_learning.json").write_text(json.dumps(meta, indent=1))
    table = ["| points in the estimator | acceptance (mean of 50 draws) |", "|---|---|"]
    table += [f"| {p} | {a:.2f} |" for p, a in rows]
    (results / "online_learning.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
