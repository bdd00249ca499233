"""``pymc_rnshmc.sample``'s default evaluator: where do local worker processes pay?

    python -m benchmarks.local_workers                         # 2 chains, 2 cores, ~15 min
    python -m benchmarks.local_workers --seconds 0.001,0.005 --output local_workers_check

:func:`pymc_rnshmc.sample` on :func:`pymc_rnshmc.workloads.sleeping_normal` (a correlated
Gaussian, d = 5, whose every logp or logp-and-gradient call sleeps ``--seconds``, as a solve
would), three ways per cost, in one run:

- **default**: ``sample``'s own choice (:class:`~pymc_rnshmc.step_methods.local_evaluator.
  LocalEvaluator`, ``cores`` workers where the measured cost pays for them);
- **this process**: ``cores=1``;
- **workers**: ``ProcessEvaluator(workers=cores)`` whatever the cost.

Reported: what the default chose, the three whole calls, and whether the draws were the same.
Where the workers are faster than this process, the default should have chosen them, and the
reverse. The sleep leaves the cores free, as a solve on another machine would; a CPU-bound
model on ``cores`` cores gains at most as much. Results in ``benchmarks/results/<output>.*``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time

import numpy as np

import pymc_rnshmc
from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator
from pymc_rnshmc.step_methods.local_evaluator import LocalEvaluator
from pymc_rnshmc.workloads import sleeping_normal


def whole_call(model, args, seed: int, **where) -> tuple[float, np.ndarray]:
    """Seconds of one ``sample`` call, and its draws."""
    start = time.perf_counter()
    with model:
        idata = pymc_rnshmc.sample(
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            step=RNSHMC(weigh_costs=False),  # the same draws whatever each call took
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **where,
        )
    return time.perf_counter() - start, np.asarray(idata.posterior["x"].values)


def compare(seconds: float, args, seed: int) -> dict:
    """The three ways for one cost."""
    model = sleeping_normal(dim=5, seconds=seconds)
    chooser = LocalEvaluator(
        min(args.cores, args.chains), evaluations=args.chains * (args.tune + args.draws)
    )
    row = {}
    row["default s"], draws = whole_call(model, args, seed, evaluator=chooser)
    chooser.close()
    row["chosen"] = chooser.choice.workers
    row["reason"] = chooser.choice.reason
    row["this process s"], alone = whole_call(model, args, seed, cores=1)
    workers = ProcessEvaluator(workers=min(args.cores, args.chains))
    try:
        row["workers s"], apart = whole_call(model, args, seed, evaluator=workers)
    finally:
        workers.close()
    row["same draws"] = bool(np.array_equal(draws, alone) and np.array_equal(draws, apart))
    faster = "workers" if row["workers s"] < row["this process s"] else "this process"
    row["faster"] = faster
    return {key: round(v, 1) if isinstance(v, float) else v for key, v in row.items()}


def markdown(results: dict) -> str:
    lines = [
        f"## Local worker processes or this process, {results['date']}",
        "",
        f"pymc {results['pymc']}; {results['machine']}; sleeping_normal(dim=5); "
        f"{results['chains']} chains of {results['tune']} + {results['draws']}; "
        f"cores={results['cores']}; seed {results['seed']}.",
        "",
        "| s a call | default chose | default s | this process s | workers s | faster "
        "| same draws |",
        "|---|---|---|---|---|---|---|",
    ]
    for seconds, row in results["rows"].items():
        chose = "workers" if row["chosen"] > 1 else "this process"
        lines.append(
            f"| {seconds} | {chose} | {row['default s']} | {row['this process s']} | "
            f"{row['workers s']} | {row['faster']} | {row['same draws']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", default="0,0.0005,0.001,0.002,0.005,0.02")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default="local_workers")
    args = parser.parse_args()
    results = run_metadata(
        chains=args.chains, cores=args.cores, tune=args.tune, draws=args.draws, seed=args.seed
    )
    results["rows"] = {}
    for seconds in map(float, args.seconds.split(",")):
        results["rows"][seconds] = compare(seconds, args, args.seed)
        write_results(args.output, results, markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
