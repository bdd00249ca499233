"""Pooled chains streamed (exploring, and after tuning) against lockstep, on worker processes.

    python -m benchmarks.kept_stream                   # 4 chains, 4 workers, 50 ms a solve
    python -m benchmarks.kept_stream --chains 8 --workers 8 --seeds 1,2 --output kept_stream_8

:func:`pymc_rnshmc.sample` on :func:`pymc_rnshmc.workloads.sleeping_normal` (a correlated
Gaussian, d = 5, whose every logp or logp-and-gradient call sleeps ``--seconds``, as a forward
solve would; sleeping, the workers leave the cores free, so more workers than cores measure
what a cluster would), with ``ProcessEvaluator(workers=--workers)``, twice per seed:

- **streamed**: the package's default: while the chains explore before the first fit, and
  after tuning, each chain's next draw is begun as soon as its last is back
  (:mod:`pymc_rnshmc.step_methods.draw_stream`);
- **lockstep**: the same evaluator with its streaming methods hidden, so every round waits for
  the longest of its chains' exact work, as before streaming.

Both make the same draws (checked). Reported: the whole call; the exploration's and the kept
phase's wall times (the exploration's from the end of every chain's first draw, which starts
the workers; the kept phase's from its first draw's start to its last one's end); and the kept
phase's floor, the busiest chain's own exact calls in it times ``--seconds``. Results go to
``benchmarks/results/<output>.{json,md}``.
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
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator
from pymc_rnshmc.workloads import sleeping_normal


class Lockstep:
    """A ``ProcessEvaluator`` without its streaming methods: the kept draws go in lockstep."""

    def __init__(self, evaluator: ProcessEvaluator) -> None:
        self.evaluator = evaluator

    def start(self, sampler) -> None:
        self.evaluator.start(sampler)

    def evaluate(self, requests):
        return self.evaluator.evaluate(requests)

    def explore(self, requests):
        return self.evaluator.explore(requests)


def stretch_seconds(stats, draws: slice = slice(None)) -> float:
    """Wall time of the ``draws`` of every chain: first start to last end."""
    start = np.asarray(stats["perf_counter_start"].values, dtype=float)[:, draws]
    end = start + np.asarray(stats["perf_counter_diff"].values, dtype=float)[:, draws]
    return float(end.max() - start.min())


def exploring_seconds(idata) -> float:
    """Wall time of the warm-up's first rounds, where every chain explores, after the first.

    From the end of every chain's first draw (the workers started, each unpickling the
    sampler) to the end of the last exploring draw.
    """
    stats = idata["warmup_sample_stats"]
    exploring = (np.asarray(stats["phase"].values) == 0).all(axis=0)
    rounds = exploring.size if exploring.all() else int(np.argmin(exploring))
    start = np.asarray(stats["perf_counter_start"].values, dtype=float)
    end = start + np.asarray(stats["perf_counter_diff"].values, dtype=float)
    return float(end[:, rounds - 1].max() - end[:, 0].max())


def run_one(streamed: bool, model, args, seed: int):
    evaluator = ProcessEvaluator(workers=args.workers)
    try:
        start = time.perf_counter()
        with model:
            idata = pymc_rnshmc.sample(
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
                discard_tuned_samples=False,
                evaluator=evaluator if streamed else Lockstep(evaluator),
            )
        whole = time.perf_counter() - start
    finally:
        evaluator.close()
    calls = np.asarray(idata["sample_stats"]["n_logp_evals"].values, dtype=float).sum(axis=1)
    row = {
        "whole call s": round(whole, 1),
        "exploring s": round(exploring_seconds(idata), 1),
        "kept phase s": round(stretch_seconds(idata["sample_stats"]), 1),
        "kept phase floor s": round(float(calls.max()) * args.seconds, 1),
    }
    return row, np.asarray(idata.posterior["x"].values)


def markdown(results: dict) -> str:
    lines = [
        f"## Pooled chains, streamed and in lockstep, {results['date']}",
        "",
        f"pymc {results['pymc']}; {results['machine']}; sleeping_normal(dim=5, seconds="
        f"{results['seconds']}); {results['chains']} chains of {results['tune']} + "
        f"{results['draws']}; ProcessEvaluator(workers={results['workers']}).",
        "",
        "| seed | whole call s, lockstep → streamed | exploring s, lockstep → streamed | "
        "kept phase s, lockstep → streamed | floor: busiest chain's kept calls | same draws |",
        "|---|---|---|---|---|---|",
    ]
    for seed, run in results["runs"].items():
        lock, stream = run["lockstep"], run["streamed"]
        lines.append(
            f"| {seed} | {lock['whole call s']} → {stream['whole call s']} | "
            f"{lock['exploring s']} → {stream['exploring s']} | "
            f"{lock['kept phase s']} → {stream['kept phase s']} | "
            f"{stream['kept phase floor s']} | {run['same draws']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.05)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--output", default="kept_stream")
    args = parser.parse_args()
    model = sleeping_normal(dim=5, seconds=args.seconds)
    results = run_metadata(
        chains=args.chains,
        workers=args.workers,
        seconds=args.seconds,
        tune=args.tune,
        draws=args.draws,
    )
    results["runs"] = {}
    for seed in map(int, args.seeds.split(",")):
        lockstep, draws = run_one(False, model, args, seed)
        streamed, again = run_one(True, model, args, seed)
        same = bool(np.array_equal(draws, again))
        results["runs"][seed] = {"lockstep": lockstep, "streamed": streamed, "same draws": same}
        write_results(args.output, results, markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
