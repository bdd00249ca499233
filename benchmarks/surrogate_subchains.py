"""Surrogate subchains: several surrogate transitions per exact ``logp`` (a study).

A kept surrogate draw costs one exact ``logp``, so exact evaluations to an ESS of 1000 cannot
fall below ``1000 / (ESS per kept draw)``. One way to raise the ESS per kept draw is the
surrogate-transition (delayed-acceptance) kernel with a subchain: ``k`` transitions that leave
the surrogate's ``exp(-U~)`` invariant (the frozen kernel's trajectories tested on the surrogate
alone, :class:`~pymc_rnshmc.hmc.corrections.SurrogateTarget`), then one test with the ratio
``pi(y) pi~(x) / (pi(x) pi~(y))``, as :class:`~pymc_rnshmc.hmc.corrections.DelayedAcceptance`
has it for one tree. A power of a reversible kernel is reversible, so the chain stays exact.

For each workload and seed, RNSHMC is tuned with its defaults (1000 tuning draws) and its frozen
kernel then makes ``--draws`` transitions from the chain's last point, once as the package
makes them (``k = 0`` in the table: one trajectory, the kernel's own correction) and once for
each subchain length. No safety net: only the kernels are compared. Reported: the second-stage
acceptance (or the kernel's), the inner acceptance on the surrogate, min bulk and tail ESS per
draw, exact ``logp`` per draw and seconds per draw.

    python -m benchmarks.surrogate_subchains --workloads sleep_0,gaussian_process,pde_30 \\
        --seeds 1,2 --subchains 0,1,3,5 --output surrogate_subchains
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import logging
import time
import warnings

import numpy as np


def tuned_chain(workload: str, seed: int):
    """RNSHMC's chain after 1000 tuning draws (and 100 kept ones) with its defaults."""
    import pymc as pm

    from benchmarks.economy import build_model
    from pymc_rnshmc import RNSHMC

    model, _ = build_model(workload)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = RNSHMC()
        pm.sample(
            draws=100,
            tune=1000,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            step=step,
        )
    return step._chain


def package_draws(kernel, target, start: np.ndarray, draws: int, rng) -> tuple[np.ndarray, list]:
    """``draws`` transitions of the frozen kernel as the package makes them."""
    from pymc_rnshmc.hmc.kernel import kernel_step
    from pymc_rnshmc.hmc.transition import CachedPoint

    point = CachedPoint(start, target.logp(start), ())
    positions, accepts = np.empty((draws, len(start))), []
    for i in range(draws):
        result = kernel_step(kernel, point, rng, target, diagnose=False)
        point = CachedPoint(result.end.position, result.end.logp, ())
        positions[i] = point.position
        accepts.append(result.accept)
    return positions, accepts


def subchain_draws(
    kernel, target, start: np.ndarray, draws: int, length: int, rng
) -> tuple[np.ndarray, list, list]:
    """``draws`` transitions of ``length`` surrogate-only steps and one second-stage test."""
    from pymc_rnshmc.hmc.corrections import SurrogateTarget
    from pymc_rnshmc.hmc.kernel import kernel_step
    from pymc_rnshmc.hmc.transition import CachedPoint

    potential = kernel.surrogate.potential
    alone = kernel._replace(correction=SurrogateTarget(kernel.correction, potential))
    position, logp, surrogate_u = start, target.logp(start), float(potential(start))
    positions, accepts, inner = np.empty((draws, len(start))), [], []
    for i in range(draws):
        point = CachedPoint(position, -surrogate_u, (), on_surrogate=True)
        for _ in range(length):
            result = kernel_step(alone, point, rng, target, diagnose=False)
            point = result.end
            inner.append(result.accept)
        accept = 1.0
        if not np.array_equal(point.position, position):
            end_logp, end_u = target.logp(point.position), float(potential(point.position))
            log_ratio = (end_logp + end_u) - (logp + surrogate_u)
            accept = float(np.exp(min(log_ratio, 0.0))) if np.isfinite(end_logp) else 0.0
            if rng.uniform() < accept:
                position, logp, surrogate_u = point.position.copy(), end_logp, end_u
        positions[i] = position
        accepts.append(accept)
    return positions, accepts, inner


def measure(workload: str, seed: int, lengths: list[int], draws: int) -> list[dict]:
    """One row per subchain length (0: the package's kernel) for one tuned chain."""
    from pymc_rnshmc.comparison.table import coordinate_ess

    chain = tuned_chain(workload, seed)
    if chain.phase.name != "SURROGATE":
        return [{"workload": workload, "seed": seed, "phase": chain.phase.name}]
    kernel, target, start = chain.warmup.kernel, chain.exact_model, chain.cache.position.copy()
    rows = []
    for length in lengths:
        rng, clock = np.random.default_rng(seed + 100), time.perf_counter()
        if length == 0:
            (positions, accepts), inner = package_draws(kernel, target, start, draws, rng), []
        else:
            positions, accepts, inner = subchain_draws(kernel, target, start, draws, length, rng)
        seconds = time.perf_counter() - clock
        bulk = coordinate_ess(positions[None], "bulk")
        tail = coordinate_ess(positions[None], "tail")
        rows.append(
            {
                "workload": workload,
                "seed": seed,
                "subchain": length,
                "accept": float(np.mean(accepts)),
                "inner accept": float(np.mean(inner)) if inner else None,
                "min bulk ESS per draw": float(bulk.min() / draws),
                "min tail ESS per draw": float(tail.min() / draws),
                "ms per draw": 1e3 * seconds / draws,
            }
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    from benchmarks.measure import markdown_table, run_metadata, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="sleep_0,gaussian_process,pde_30")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--subchains", default="0,1,3,5")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--output", default="surrogate_subchains")
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    lengths = [int(length) for length in args.subchains.split(",")]
    rows = [
        row
        for workload in args.workloads.split(",")
        for seed in (int(seed) for seed in args.seeds.split(","))
        for row in measure(workload, seed, lengths, args.draws)
    ]
    columns = (
        "workload",
        "seed",
        "subchain",
        "accept",
        "inner accept",
        "min bulk ESS per draw",
        "min tail ESS per draw",
        "ms per draw",
    )
    meta = run_metadata()
    measured = [row for row in rows if "subchain" in row]
    skipped = [
        f"- {row['workload']}, seed {row['seed']}: ended tuning in the {row['phase']} phase"
        for row in rows
        if "subchain" not in row
    ]
    lines = [
        "# Surrogate subchains (a study)",
        "",
        str(meta),
        "",
        *markdown_table(measured, columns),
        "",
        *skipped,
    ]
    write_results(args.output, {"meta": meta, "args": vars(args), "rows": rows}, "\n".join(lines))


if __name__ == "__main__":
    main()
