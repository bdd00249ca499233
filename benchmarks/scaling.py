"""Pooled chains on a cluster at 1 s a solve: measured rounds, projected time to bulk ESS 1000.

    python -m benchmarks.scaling                          # workers 1, 2, 4, 8, 16; seed 1
    python -m benchmarks.scaling --workers 1,2 --tune 300 --draws 300 --output smoke_scaling
    python -m benchmarks.scaling --split-tuning --overheads-from scaling --output scaling_split

A run of pooled chains at 1 s a solve takes about an hour per configuration (the exploration
alone is 50 NUTS draws of a dozen solves each, per chain), too long for five of them on one
machine. So the two parts that decide the time are measured separately, and combined:

1. **Rounds on the cluster.** A ``dask.distributed`` ``LocalCluster`` of ``W`` single-threaded
   worker processes gets batches of ``W`` exact evaluations of
   :func:`pymc_rnshmc.workloads.sleeping_normal` (every call sleeps ``--seconds``, default 1 s),
   through :class:`~pymc_rnshmc.step_methods.evaluators.DaskEvaluator`. The wall time of a batch
   beyond the solve is the driver's and the wire's overhead per round.
2. **What the chains ask for.** The same model without the sleep, sampled by
   :func:`pymc_rnshmc.sample` with ``K = W`` chains: the draws do not depend on how long a solve
   takes, so this run gives the exact calls each chain makes in each round, and the ESS. The
   round sends the explorers' exact draws (NUTS trajectories: exploring, safety net) as one
   batch and then the surrogate moves' logps as another; each batch takes the longest of its
   tasks when ``W >= K`` (a list schedule otherwise), at ``--seconds`` a call, plus the measured
   overhead of a round trip; to which the round's own work in the sampling process is added
   (fits, surrogate trajectories: the round's wall time in this run without sleep). That is
   how the warm-up goes after the first fit. Before it (the exploration) and after tuning the
   chains stream their draws (:mod:`pymc_rnshmc.step_methods.draw_stream`): such a stretch
   lasts as long as the busiest chain's own calls, plus a round trip per task and the
   driver's work (:func:`streamed_seconds`); the time with every round in lockstep is shown
   beside it.

The baselines are PyMC's NUTS with a diagonal and with a dense mass matrix
(``init="jitter+adapt_full"``), ``K`` chains on ``K`` cores (``cores=K``), each chain paying its
own calls at ``--seconds`` each, without overhead: the time is the longest chain's. The ratio is
against the faster of the two. Both are projected to min bulk ESS 1000 over the coordinates:
the warm-up, then the kept rounds that ESS 1000 needs at the run's ESS per kept draw.

``--split-tuning``: the pooled chains share one tuning budget, as they share one warm-up: each
tunes ``max(--min-tune, tune / K)`` draws, and they share the exploration
(``PooledSurrogate(share_exploration=True)``); NUTS keeps ``--tune`` per chain.
``--overheads-from NAME`` takes the round overheads from an earlier result file instead of
measuring them again.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import heapq
import json
import time
import warnings

import numpy as np
import pymc as pm

from benchmarks.measure import RESULTS, run_metadata, write_results
from pymc_rnshmc import RNSHMC, PooledSurrogate
from pymc_rnshmc.comparison.table import coordinate_ess, posterior_coordinates
from pymc_rnshmc.step_methods.evaluators import DaskEvaluator
from pymc_rnshmc.workloads import sleeping_normal

DIM = 5


def round_overheads(workers: int, seconds: float, rounds: int) -> list[float]:
    """Wall time beyond ``seconds`` of batches of ``workers`` evaluations on ``workers`` workers."""
    from distributed import Client, LocalCluster

    model = sleeping_normal(dim=DIM, seconds=seconds)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = RNSHMC()
    rng = np.random.default_rng(0)
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster,
        Client(cluster) as client,
    ):
        evaluator = DaskEvaluator(client)
        evaluator.start(sampler)
        batch = [(sampler.exact_model, rng.standard_normal(DIM), True) for _ in range(workers)]
        evaluator.evaluate(batch)  # each worker unpickles the sampler at its first task
        overheads = []
        for _ in range(rounds):
            batch = [(sampler.exact_model, rng.standard_normal(DIM), True) for _ in range(workers)]
            start = time.perf_counter()
            evaluator.evaluate(batch)
            overheads.append(time.perf_counter() - start - seconds)
    return overheads


def makespan(costs: np.ndarray, workers: int) -> float:
    """Time of a batch of tasks of ``costs`` on ``workers`` workers taking them in order."""
    if costs.size == 0:
        return 0.0
    free = [0.0] * min(workers, costs.size)
    for cost in costs:
        heapq.heappush(free, heapq.heappop(free) + float(cost))
    return max(free)


def calls(idata, group: str) -> np.ndarray:
    """Exact model calls per chain and draw (a joint logp-and-gradient call counts once).

    The surrogate samplers count calls in ``n_logp_evals``; PyMC's NUTS reports its leapfrog
    steps, one joint call each, as ``n_steps``.
    """
    stats = idata[group]
    name = "n_logp_evals" if "n_logp_evals" in stats else "n_steps"
    return np.asarray(stats[name].values, dtype=float)


def min_bulk_ess_per_draw(idata) -> float:
    draws = posterior_coordinates(idata.posterior)
    return float(coordinate_ess(draws, "bulk").min()) / (draws.shape[0] * draws.shape[1])


def pooled_tune(chains: int, args) -> int:
    """Each pooled chain's tuning draws: ``--tune``, or its share with ``--split-tuning``."""
    return max(args.min_tune, args.tune // chains) if args.split_tuning else args.tune


def sample(kind: str, chains: int, args, seed: int):
    model = sleeping_normal(dim=DIM, seconds=0.0)
    options = {
        "draws": args.draws,
        "tune": pooled_tune(chains, args) if kind == "pooled" else args.tune,
        "chains": chains,
        "random_seed": seed,
        "progressbar": False,
        "compute_convergence_checks": False,
        "discard_tuned_samples": False,
    }
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "pooled":
            step = PooledSurrogate(RNSHMC(), share_exploration=args.split_tuning)
            return pm.sample(step=step, cores=1, **options)
        init = "jitter+adapt_full" if kind == "nuts dense" else "jitter+adapt_diag"
        return pm.sample(nuts_sampler="pymc", init=init, cores=1, **options)


def max_z_of_means(idata) -> float:
    """Largest ``|mean| / MCSE`` over the coordinates (the exact means are 0)."""
    draws = posterior_coordinates(idata.posterior)
    mcse = draws.std(axis=(0, 1)) / np.sqrt(coordinate_ess(draws, "bulk"))
    return float(np.max(np.abs(draws.mean(axis=(0, 1))) / mcse))


def round_seconds(costs: np.ndarray, exact: np.ndarray, workers: int, seconds: float, overhead):
    """One round: the explorers' exact draws as one batch, then the surrogate moves' as another.

    ``costs``: each chain's calls; ``exact``: whether its draw was an exact (explorer) draw.
    Each batch that is sent takes its list schedule's time plus the overhead of a round trip.
    """
    total = 0.0
    for batch in (costs[exact], costs[~exact]):
        if batch.size:
            total += makespan(batch, workers) * seconds + overhead
    return total


def local_seconds(idata, group: str) -> np.ndarray:
    """Each round's wall time in a run without sleep, in process: the driver's own work.

    Every chain's ``perf_counter_diff`` is its own work plus its share of the round's batches,
    so their sum over the chains is the round's wall time (here: fits, surrogate trajectories,
    bookkeeping, and the model's calls without their sleep).
    """
    return np.asarray(idata[group]["perf_counter_diff"].values, dtype=float).sum(axis=0)


def pooled_projection(idata, workers: int, seconds: float, overhead: float, local=None) -> dict:
    """Seconds to min bulk ESS 1000 of the pooled chains: the rounds' batches, one by one.

    ``local``: the run whose rounds' wall time without sleep is the driver's own work (default
    ``idata``, which must then be such a run).
    """
    local = idata if local is None else local
    rounds = {}
    for group in ("warmup_sample_stats", "sample_stats"):
        costs = calls(idata, group).T  # (draw, chain)
        exact = ~np.asarray(idata[group]["used_surrogate"].values, dtype=bool).T
        batches = [round_seconds(c, e, workers, seconds, overhead) for c, e in zip(costs, exact)]
        rounds[group] = np.array(batches) + local_seconds(local, group)
    ess_per_round = min_bulk_ess_per_draw(idata) * calls(idata, "sample_stats").shape[0]
    kept_rounds = 1000.0 / ess_per_round
    if workers < calls(idata, "sample_stats").shape[0]:
        raise ValueError("the streamed projection assumes a worker per chain")
    lockstep_warm_up = float(rounds["warmup_sample_stats"].sum())
    explored = exploring_rounds(idata)
    warm_up = streamed_seconds(
        calls(idata, "warmup_sample_stats")[:, :explored],
        seconds,
        overhead,
        local_seconds(local, "warmup_sample_stats")[:explored].sum(),
    ) + float(rounds["warmup_sample_stats"][explored:].sum())
    kept_round = float(rounds["sample_stats"].mean())
    kept = calls(idata, "sample_stats")
    streamed = (
        streamed_seconds(kept, seconds, overhead, local_seconds(local, "sample_stats").sum())
        / kept.shape[1]
    )
    return {
        "warm-up s": warm_up,
        "warm-up s, lockstep": lockstep_warm_up,
        "kept round s": kept_round,
        "streamed kept draw s": streamed,
        "whole call s": warm_up + streamed * rounds["sample_stats"].size,
        "whole call s, lockstep": lockstep_warm_up + float(rounds["sample_stats"].sum()),
        "ESS per round": ess_per_round,
        "s to bulk ESS 1000, lockstep": lockstep_warm_up + kept_rounds * kept_round,
        "s to bulk ESS 1000": warm_up + kept_rounds * streamed,
        "max |z| mean": max_z_of_means(idata),
    }


def exploring_rounds(idata) -> int:
    """The warm-up's first rounds, where every chain explores: the chains stream them."""
    exploring = (np.asarray(idata["warmup_sample_stats"]["phase"].values) == 0).all(axis=0)
    return exploring.size if exploring.all() else int(np.argmin(exploring))


def streamed_seconds(costs: np.ndarray, seconds: float, overhead: float, driver: float) -> float:
    """A stretch of draws the chains stream (``draw_stream``), ``costs`` their calls (chain,
    draw).

    No chain waits for another: with a worker per chain, the stretch lasts as long as the
    busiest chain's calls at ``seconds`` each, plus a round trip per draw that sends a task;
    the ``driver``'s own work (all chains', one after the other in this process) is added.
    """
    busiest = np.max(costs.sum(axis=1) * seconds + (costs > 0).sum(axis=1) * overhead)
    return float(busiest) + float(driver)


def nuts_projection(idata, seconds: float) -> dict:
    """Seconds to min bulk ESS 1000 of K chains on K cores: the longest chain's calls."""
    warm_up = calls(idata, "warmup_sample_stats").sum(axis=1) * seconds
    per_draw = calls(idata, "sample_stats").mean(axis=1) * seconds
    chains = per_draw.size
    kept_draws = 1000.0 / (min_bulk_ess_per_draw(idata) * chains)
    return {
        "warm-up s": float(warm_up.max()),
        "kept round s": float(per_draw.max()),
        "ESS per round": min_bulk_ess_per_draw(idata) * chains,
        "s to bulk ESS 1000": float(np.max(warm_up + kept_draws * per_draw)),
    }


def markdown(results: dict) -> str:
    lines = [
        f"## Pooled chains on a Dask cluster at {results['seconds']} s a solve, {results['date']}",
        "",
        f"pymc {results['pymc']}; {results['machine']}; sleeping_normal(dim={DIM}); "
        f"{results['tune']} + {results['draws']} per chain"
        + (
            f" (pooled: tuning split among the chains, at least {results['min tune']} each, "
            "sharing the exploration)"
            if results["split tuning"]
            else ""
        )
        + f"; seed {results['seed']}. Rounds measured on a LocalCluster; times to ESS 1000 "
        "projected from them and from the runs' calls (module docstring).",
        "",
        "| workers = chains | round overhead s (median) | pooled: warm-up s | pooled: s to bulk "
        "ESS 1000 (all in lockstep) | ideal (1 worker / W) | pooled: max \\|z\\| of "
        "means | NUTS, W chains on W cores: s to bulk ESS 1000 (diagonal / dense) | pooled / "
        "faster NUTS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    one = results["rows"][0]["pooled"]["s to bulk ESS 1000"] if results["rows"] else np.nan
    for row in results["rows"]:
        pooled, nuts, dense = row["pooled"], row["nuts"], row["nuts dense"]
        fastest = min(nuts["s to bulk ESS 1000"], dense["s to bulk ESS 1000"])
        ideal = one / row["workers"] if results["rows"][0]["workers"] == 1 else np.nan
        lockstep = pooled.get("s to bulk ESS 1000, lockstep", np.nan)
        lines.append(
            f"| {row['workers']} | {row['overhead']:.3f} | {pooled['warm-up s']:.0f} | "
            f"{pooled['s to bulk ESS 1000']:.0f} ({lockstep:.0f}) | {ideal:.0f} | "
            f"{pooled['max |z| mean']:.2f} | "
            f"{nuts['s to bulk ESS 1000']:.0f} / {dense['s to bulk ESS 1000']:.0f} | "
            f"{pooled['s to bulk ESS 1000'] / fastest:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--split-tuning", action="store_true")
    parser.add_argument("--min-tune", type=int, default=200)
    parser.add_argument("--overheads-from", default=None)
    parser.add_argument("--output", default="scaling")
    args = parser.parse_args()
    results = run_metadata(
        seconds=args.seconds,
        tune=args.tune,
        draws=args.draws,
        seed=args.seed,
        split_tuning=args.split_tuning,
        min_tune=args.min_tune,
    )
    results["split tuning"], results["min tune"] = args.split_tuning, args.min_tune
    results["rows"] = []
    measured = {}
    if args.overheads_from:
        earlier = json.loads((RESULTS / f"{args.overheads_from}.json").read_text())
        measured = {row["workers"]: row["overheads"] for row in earlier["rows"]}
    for workers in map(int, args.workers.split(",")):
        overheads = measured.get(workers) or round_overheads(workers, args.seconds, args.rounds)
        overhead = float(np.median(overheads))
        pooled = sample("pooled", workers, args, args.seed)
        nuts = sample("nuts", workers, args, args.seed)
        dense = sample("nuts dense", workers, args, args.seed)
        results["rows"].append(
            {
                "workers": workers,
                "overheads": overheads,
                "overhead": overhead,
                "pooled": pooled_projection(pooled, workers, args.seconds, overhead),
                "nuts": nuts_projection(nuts, args.seconds),
                "nuts dense": nuts_projection(dense, args.seconds),
            }
        )
        write_results(args.output, results, markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
