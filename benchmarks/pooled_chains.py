"""Chains that share one surrogate against chains that each fit their own, on a slow model.

    python -m benchmarks.pooled_chains                         # 4 chains, 20 ms a solve
    python -m benchmarks.pooled_chains --chains 4 --seconds 0.02 --workers 2 --seeds 1,2

The model is :func:`pymc_rnshmc.workloads.sleeping_normal` (a correlated Gaussian, d = 5, whose
every logp or logp-and-gradient call sleeps ``--seconds``, as a forward solve would). Per seed,
three runs of ``--chains`` chains of ``--tune`` + ``--draws``:

- **separate**: ``pm.sample(step=RNSHMC(), cores=1)``: each chain explores, fits and samples on
  its own, one after the other;
- **pooled**: :func:`pymc_rnshmc.sample`: the chains in lockstep, one surrogate fitted on all of
  their exact draws, each round's exact evaluations in one batch, in this process;
- **pooled, N workers**: the same with ``ProcessEvaluator(workers=N)``.

For each: the whole call (seconds), the exact evaluations (logp and gradient calls, all chains)
until the surrogate started and in all, the min bulk and tail ESS over the coordinates, and the
largest error of a posterior mean in MCSE (the exact mean is 0). A short run of each kind first
compiles the model's functions, so that no run's call includes the compilation. Results go to
``benchmarks/results/<output>.{json,md}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_rnshmc
from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator
from pymc_rnshmc.workloads import sleeping_normal


def _stat(idata, group: str, name: str) -> np.ndarray:
    return np.asarray(idata[group][name].values, dtype=float)


def summarize(idata, seconds: float) -> dict:
    """Whole call, exact evaluations (until the surrogate started, and in all), ESS, error."""
    evaluations = {}
    for group in ("warmup_sample_stats", "sample_stats"):
        evaluations[group] = _stat(idata, group, "n_logp_evals") + _stat(
            idata, group, "n_gradient_evals"
        )
    phase = _stat(idata, "warmup_sample_stats", "phase")
    started = np.argmax(phase == 1, axis=1)  # each chain's first surrogate draw
    before = sum(evaluations["warmup_sample_stats"][c, :s].sum() for c, s in enumerate(started))
    x = np.asarray(idata.posterior["x"].values)
    flat = x.reshape(-1, x.shape[-1])
    bulk = az.ess(idata, method="bulk")["x"].values
    tail = az.ess(idata, method="tail")["x"].values
    mcse = flat.std(axis=0) / np.sqrt(bulk)
    return {
        "whole call s": round(seconds, 1),
        "exact evaluations before the surrogate": int(before),
        "exact evaluations in all": int(sum(e.sum() for e in evaluations.values())),
        "min bulk ESS": round(float(bulk.min())),
        "min tail ESS": round(float(tail.min())),
        "bulk ESS per second": round(float(bulk.min()) / seconds, 2),
        "largest mean error, MCSE": round(float(np.max(np.abs(flat.mean(axis=0)) / mcse)), 2),
    }


def run_one(kind: str, model, args, seed: int) -> dict:
    """One run of ``kind`` (separate, pooled, or pooled with workers), summarized."""
    options = {
        "tune": args.tune,
        "draws": args.draws,
        "chains": args.chains,
        "random_seed": seed,
        "progressbar": False,
        "discard_tuned_samples": False,
        "compute_convergence_checks": False,
    }
    start = time.perf_counter()
    with model:
        if kind == "separate":
            idata = pm.sample(step=RNSHMC(), cores=1, **options)
        elif kind == "pooled":
            idata = pymc_rnshmc.sample(cores=1, **options)  # evaluations in this process
        else:
            evaluator = ProcessEvaluator(workers=args.workers)
            try:
                idata = pymc_rnshmc.sample(evaluator=evaluator, **options)
            finally:
                evaluator.close()
    return summarize(idata, time.perf_counter() - start)


def markdown(results: dict) -> str:
    kinds = list(next(iter(results["runs"].values())))
    rows = list(next(iter(next(iter(results["runs"].values())).values())))
    lines = [f"## Pooled chains on a slow model, {results['date']}", ""]
    lines.append(
        f"pymc {results['pymc']}; {results['machine']}; sleeping_normal(dim=5, seconds="
        f"{results['seconds']}); {results['chains']} chains of {results['tune']} + "
        f"{results['draws']}."
    )
    for seed, by_kind in results["runs"].items():
        lines += ["", f"### seed {seed}", "", "| | " + " | ".join(kinds) + " |"]
        lines.append("|---" * (len(kinds) + 1) + "|")
        for row in rows:
            lines.append(f"| {row} | " + " | ".join(str(by_kind[k][row]) for k in kinds) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--output", default="pooled_chains")
    args = parser.parse_args()
    model = sleeping_normal(dim=5, seconds=args.seconds)
    results = run_metadata(
        chains=args.chains, seconds=args.seconds, tune=args.tune, draws=args.draws
    )
    results["runs"] = {}
    warm_up = argparse.Namespace(**{**vars(args), "chains": 2, "tune": 20, "draws": 20})
    for kind in ("separate", "pooled"):  # compile the model's functions before timing
        run_one(kind, model, warm_up, seed=0)
    kinds = ("separate", "pooled", f"pooled, {args.workers} workers")
    for seed in map(int, args.seeds.split(",")):
        results["runs"][seed] = {kind: run_one(kind, model, args, seed) for kind in kinds}
        write_results(args.output, results, markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
