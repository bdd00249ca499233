"""The projection of :mod:`benchmarks.scaling` against pooled chains really run on a cluster.

    python -m benchmarks.scaling_check                     # 4 workers, 50 ms a solve
    python -m benchmarks.scaling_check --workers 2 --seconds 0.05 --tune 400 --draws 200

``benchmarks.scaling`` projects the time of pooled chains on a Dask cluster from the calls each
chain makes in each round and the measured overhead of a round trip. Here the same chains
(``--workers`` chains, each with a share of ``--tune`` as with ``--split-tuning``) run end to end
through :class:`~pymc_rnshmc.step_methods.evaluators.DaskEvaluator` on a ``LocalCluster`` of
``--workers`` processes, on :func:`~pymc_rnshmc.workloads.sleeping_normal` sleeping
``--seconds`` a call. Measured: the sampling's wall time, from the first draw's start to the
last draw's end. Projected (:func:`benchmarks.scaling.pooled_projection`): the warm-up's
rounds' calls, at ``--seconds`` each, plus the round overhead measured on the same cluster
size just before, plus each round's own work in the sampling process (from the same chains run
in process without the sleep: the draws depend on the seed only); the streamed exploration and
kept draws as the busiest chain's calls.
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
from benchmarks.scaling import DIM, max_z_of_means, pooled_projection, round_overheads
from pymc_rnshmc import RNSHMC, PooledSurrogate
from pymc_rnshmc.comparison.table import coordinate_ess, posterior_coordinates
from pymc_rnshmc.step_methods.evaluators import DaskEvaluator
from pymc_rnshmc.workloads import sleeping_normal


def measured_seconds(idata) -> float:
    """Wall time of the sampling: from the first draw's start to the last draw's end.

    (Not the chains' clocks summed: after tuning the chains stream, and their draws overlap.)
    """
    starts, ends = [], []
    for group in ("warmup_sample_stats", "sample_stats"):
        start = np.asarray(idata[group]["perf_counter_start"].values, dtype=float)
        starts.append(start.min())
        ends.append((start + np.asarray(idata[group]["perf_counter_diff"].values)).max())
    return float(max(ends) - min(starts))


def run(args, seconds: float, client=None):
    """The pooled chains, on the cluster of ``client`` (``None``: in process)."""
    tune = max(args.min_tune, args.tune // args.workers)
    evaluator = None if client is None else DaskEvaluator(client)
    with sleeping_normal(dim=DIM, seconds=seconds), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = PooledSurrogate(RNSHMC(), evaluator=evaluator, share_exploration=True)
        return pm.sample(
            step=step,
            tune=tune,
            draws=args.draws,
            chains=args.workers,
            cores=1,
            random_seed=args.seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.05)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--min-tune", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default="scaling_check")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    overhead = float(np.median(round_overheads(args.workers, args.seconds, rounds=10)))
    local = run(args, seconds=0.0)
    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster,
        Client(cluster) as client,
    ):
        idata = run(args, args.seconds, client)
    projection = pooled_projection(idata, args.workers, args.seconds, overhead, local=local)
    projected = projection["whole call s"]
    measured = measured_seconds(idata)
    draws = posterior_coordinates(idata.posterior)
    bulk, tail = coordinate_ess(draws, "bulk").min(), coordinate_ess(draws, "tail").min()
    results = run_metadata(**vars(args)) | {
        "overhead s": overhead,
        "min bulk ESS": float(bulk),
        "min tail ESS": float(tail),
        "max |z| mean": max_z_of_means(idata),
        "projected s": projected,
        "projected s, all in lockstep": projection["whole call s, lockstep"],
        "measured s": measured,
    }
    markdown = (
        f"## The scaling projection against a run on a LocalCluster, {results['date']}\n\n"
        f"pymc {results['pymc']}; {results['machine']}; {args.workers} workers and chains, "
        f"{args.seconds} s a solve, tuning split ({max(args.min_tune, args.tune // args.workers)}"
        f" each), {args.draws} draws; round overhead {overhead:.3f} s.\n\n"
        f"| sampling s, measured | projected | projected / measured | projected, all in "
        f"lockstep | min bulk / tail ESS | max \\|z\\| of means |\n|---|---|---|---|---|---|\n"
        f"| {measured:.1f} | {projected:.1f} | {projected / measured:.2f} | "
        f"{results['projected s, all in lockstep']:.1f} | {bulk:.0f} / {tail:.0f} | "
        f"{results['max |z| mean']:.2f} |\n"
    )
    write_results(args.output, results, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
