"""Pooled chains with the default cost weighing: do the draws change with the number of workers?

    python -m benchmarks.worker_independence                      # seeds 1-4, ~3 min
    PYTHONPATH=../before python benchmarks/worker_independence.py --output worker_indep_before

Pooled ``RNSHMC()`` chains (``weigh_costs=True``, the default) on
:func:`pymc_rnshmc.workloads.sleeping_normal` (d = 5, 5 ms a call), three ways per seed: in
this process, on one worker process, on two. Some tuning choices weigh each chain's measured
seconds; the question is whether the number of workers moves them. Reported per seed: the
median seconds charged to an exploring draw and to a surrogate tuning draw, the surrogate's
step size, and whether the kept draws equal those made in this process. Results in
``benchmarks/results/<output>.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import warnings

import numpy as np
import pymc as pm

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import RNSHMC, PooledSurrogate
from pymc_rnshmc.step_methods.evaluators import InProcessEvaluator, ProcessEvaluator
from pymc_rnshmc.workloads import sleeping_normal

WAYS = {
    "this process": InProcessEvaluator,
    "1 worker": lambda: ProcessEvaluator(1, context="fork"),
    "2 workers": lambda: ProcessEvaluator(2, context="fork"),
}


def run(model, make, seed: int, args) -> tuple[dict, np.ndarray]:
    evaluator = make()
    try:
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step = PooledSurrogate(RNSHMC(), evaluator=evaluator)
            idata = pm.sample(
                step=step,
                tune=args.tune,
                draws=args.draws,
                chains=2,
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
    finally:
        getattr(evaluator, "close", lambda: None)()
    warmup = step._pool.warmup
    costs = warmup.economy.costs
    row = {
        "exploring draw ms": round(1e3 * float(np.median(costs.exact)), 1),
        "surrogate draw ms": round(1e3 * float(np.median(costs.surrogate or [np.nan])), 2),
        "step size": round(float(warmup.bounded_step_size(False)), 4),
    }
    return row, np.asarray(idata.posterior["x"].values)


def markdown(results: dict) -> str:
    lines = [
        f"## Pooled chains, default cost weighing, 1 or 2 workers, {results['date']}",
        "",
        f"pymc {results['pymc']}; {results['machine']}; sleeping_normal(dim=5, seconds="
        f"{results['seconds']}); 2 chains of {results['tune']} + {results['draws']}.",
        "",
        "| seed | way | exploring draw ms | surrogate draw ms | step size | draws as here |",
        "|---|---|---|---|---|---|",
    ]
    for seed, ways in results["runs"].items():
        for way, row in ways.items():
            lines.append(
                f"| {seed} | {way} | {row['exploring draw ms']} | {row['surrogate draw ms']} | "
                f"{row['step size']} | {row['same draws']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--seconds", type=float, default=0.005)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--output", default="worker_independence")
    args = parser.parse_args()
    model = sleeping_normal(dim=5, seconds=args.seconds)
    results = run_metadata(seconds=args.seconds, tune=args.tune, draws=args.draws)
    results["runs"] = {}
    for seed in map(int, args.seeds.split(",")):
        ways, here = {}, None
        for way, make in WAYS.items():
            row, draws = run(model, make, seed, args)
            here = draws if here is None else here
            row["same draws"] = bool(np.array_equal(draws, here))
            ways[way] = row
        results["runs"][seed] = ways
        write_results(args.output, results, markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
