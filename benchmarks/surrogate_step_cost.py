"""Cost of one surrogate step: the network's gradient, its fused potential and gradient, and a
step of a NUTS tree and of a leapfrog trajectory on it.

    python -m benchmarks.surrogate_step_cost                 # d = 50 and 20, 2000 units
    python -m benchmarks.surrogate_step_cost --dims 50 --units 500

A network is fitted to a synthetic cubic potential (600 points) with the width and weight scale
fixed; each figure is the best of five repeats, BLAS pinned to one thread. Prints a table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from pymc_rnshmc.hmc.leapfrog import leapfrog
from pymc_rnshmc.hmc.metrics import DenseMetric
from pymc_rnshmc.hmc.nuts_tree import surrogate_nuts
from pymc_rnshmc.surrogates.network.random_network import RandomNetworkSurrogate


def best_time(function, repeats: int) -> float:
    """Best of five: microseconds per call of ``function``."""
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best * 1e6


def measure(dim: int, units: int, step_size: float) -> dict:
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(600, dim))
    potentials = 0.5 * np.sum(positions**2, 1) + 0.1 * np.sum(positions**3, 1) / dim
    gradients = positions + 0.3 * positions**2 / dim
    surrogate = RandomNetworkSurrogate(n_hidden=units, weight_scale=0.3, penalty=1e-6)
    surrogate.fit(positions, potentials, gradients, rng=rng)
    point = positions[0].copy()
    metric = DenseMetric(np.eye(dim))
    potential, gradient = surrogate.potential_and_gradient(point)
    tree_rng, steps = np.random.default_rng(1), []

    def tree():
        result = surrogate_nuts(
            point, potential, gradient, surrogate.potential_and_gradient, metric, step_size,
            tree_rng,
        )  # fmt: skip
        steps.append(result.n_steps)

    tree_us = best_time(tree, 300)

    def trajectory():
        momentum = tree_rng.normal(size=dim)
        leapfrog(point, momentum, gradient, step_size, 15, surrogate.gradient, metric.velocity)

    return {
        "gradient": best_time(lambda: surrogate.gradient(point), 3000),
        "potential and gradient": best_time(lambda: surrogate.potential_and_gradient(point), 3000),
        "NUTS tree step": tree_us / np.mean(steps),
        "leapfrog step": best_time(trajectory, 300) / 15,
        "tree steps": float(np.mean(steps)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="50,20")
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--step-size", type=float, default=0.15)
    args = parser.parse_args()
    print(
        "| d | units | gradient µs | potential+gradient µs | NUTS tree µs/step | leapfrog µs/step |"
    )
    print("|---|---|---|---|---|---|")
    with threadpool_limits(1):
        for dim in map(int, args.dims.split(",")):
            r = measure(dim, args.units, args.step_size)
            print(
                f"| {dim} | {args.units} | {r['gradient']:.1f} | {r['potential and gradient']:.1f}"
                f" | {r['NUTS tree step']:.1f} ({r['tree steps']:.0f} steps) |"
                f" {r['leapfrog step']:.1f} |"
            )


if __name__ == "__main__":
    main()
