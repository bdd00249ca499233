"""Sample the RNS-HMC paper's elliptic PDE inverse problem with PyMC's NUTS and RNSHMC; compare.

    python examples/elliptic_pde.py                          # d = 20, 30 x 30 mesh, 2 chains
    python examples/elliptic_pde.py --n-modes 5 --prior-sd 1 # the sparse-grid HMC paper's setting
    python examples/elliptic_pde.py --n-cells 8 --n-modes 3 --tune 300 --draws 100   # smoke

Every exact log density evaluation solves the PDE (bilinear finite elements, banded Cholesky)
and every exact gradient adds one adjoint solve with the same factor. Prints the seconds per
solve and per solve-plus-adjoint through the compiled PyMC functions, then the table of
:func:`pymc_rnshmc.compare_samplers` (whole call and draws, ESS and ESS per second, exact
evaluations per draw after tuning, acceptance, divergences, and the largest distance of
RNSHMC's posterior means from NUTS's in Monte Carlo standard errors).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread: multithreaded BLAS slows logp
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pymc as pm

from pymc_rnshmc import RNSHMC, compare_samplers
from pymc_rnshmc.comparison import NUTS_NAME
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde


def median_seconds(function, points) -> float:
    """Median wall time of ``function(point)`` over ``points`` (distinct, so nothing is cached)."""
    seconds = []
    for point in points:
        start = time.perf_counter()
        function(point)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def time_model(model: pm.Model, prior_sd: float, seed: int, calls: int = 50) -> tuple:
    """Seconds per compiled ``logp`` (one solve) and ``logp`` + gradient (solve + adjoint)."""
    logp = model.compile_logp()
    logp_and_gradient = model.logp_dlogp_function(ravel_inputs=True)
    logp_and_gradient.set_extra_values({})
    size = model.initial_point()["theta"].size
    points = prior_sd * np.random.default_rng(seed).standard_normal((calls + 1, size))
    logp({"theta": points[0]})  # first calls pay one-off costs
    logp_and_gradient(points[0])
    solve = median_seconds(lambda theta: logp({"theta": theta}), points[1:])
    solve_and_adjoint = median_seconds(logp_and_gradient, points[1:] + 1e-3)
    return solve, solve_and_adjoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cells", type=int, default=30, help="cells per side of the mesh")
    parser.add_argument("--n-modes", type=int, default=20, help="Karhunen-Loeve modes d")
    parser.add_argument("--prior-sd", type=float, default=0.5)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    model = elliptic_pde(n_modes=args.n_modes, prior_sd=args.prior_sd, n_cells=args.n_cells)
    solve, solve_and_adjoint = time_model(model, args.prior_sd, args.seed)
    print(
        f"Elliptic PDE inverse problem: d = {args.n_modes}, prior sd {args.prior_sd}, "
        f"{args.n_cells} x {args.n_cells} mesh, pymc {pm.__version__}\n"
        f"seconds per solve (compiled logp): {solve:.2e}; per solve + adjoint (logp and "
        f"gradient): {solve_and_adjoint:.2e}"
    )
    comparison = compare_samplers(
        model,
        samplers={"RNSHMC": RNSHMC},
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        cores=args.cores,
        random_seed=args.seed,
        nutpie=False,
        progressbar=False,
    )
    print(comparison)
    table = comparison.table
    draws = table.loc["RNSHMC", "bulk ESS/s (draws)"] / table.loc[NUTS_NAME, "bulk ESS/s (draws)"]
    call = table.loc["RNSHMC", "bulk ESS/s (call)"] / table.loc[NUTS_NAME, "bulk ESS/s (call)"]
    print(
        f"\nRNSHMC / NUTS bulk ESS per second of draws: {draws:.1f}x, of the whole call: "
        f"{call:.1f}x"
    )


if __name__ == "__main__":
    main()
