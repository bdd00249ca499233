"""Sample the RNS-HMC paper's elliptic PDE inverse problem with PyMC's NUTS and RNSHMC; compare.

    python examples/elliptic_pde.py                          # d = 20, 30 x 30 mesh, 2 chains
    python examples/elliptic_pde.py --n-modes 5 --prior-sd 1 # the sparse-grid HMC paper's setting
    python examples/elliptic_pde.py --n-cells 8 --n-modes 3 --tune 300 --draws 100   # smoke

Every exact log density evaluation solves the PDE (bilinear finite elements, banded Cholesky)
and every exact gradient adds one adjoint solve with the same factor. Prints the seconds per
solve and per solve-plus-adjoint through the compiled PyMC functions, then, per sampler: wall
time of the whole ``pm.sample`` call, time of the draws after tuning, exact logp evaluations
and gradients per draw after tuning, minimum bulk ESS, bulk ESS per second of the draws,
acceptance, and the largest distance of RNSHMC's posterior means from NUTS's in Monte Carlo
standard errors (``max |dmean|/MCSE``).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread: multithreaded BLAS slows logp
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from pymc_rnshmc import RNSHMC
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


def summarize(idata, wall_seconds: float) -> dict:
    """Headline numbers of one ``pm.sample`` result."""
    stats = idata.sample_stats
    theta = idata.posterior["theta"]
    bulk = np.asarray(az.ess(xr.Dataset({"theta": theta}), method="bulk")["theta"].values)
    sampling_seconds = float(stats["perf_counter_diff"].sum())
    acceptance = stats["accept"] if "accept" in stats else stats["acceptance_rate"]
    if "n_gradient_evals" in stats:
        gradients = float(stats["n_gradient_evals"].mean())
        logps = float(stats["n_logp_evals"].mean())
    else:  # PyMC NUTS: one joint logp-and-gradient evaluation per leapfrog step
        gradients = logps = float(stats["n_steps"].mean())
    return {
        "wall s": wall_seconds,
        "draws s": sampling_seconds,
        "logps/draw": logps,
        "grads/draw": gradients,
        "min bulk ESS": bulk.min(),
        "bulk ESS/s": bulk.min() / sampling_seconds,
        "accept": float(acceptance.mean()),
        "mean": theta.mean(("chain", "draw")).values,
        "sd": theta.std(("chain", "draw")).values,
        "bulk": bulk,
    }


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
    results = {}
    for name, step_class in {"NUTS": pm.NUTS, "RNSHMC": RNSHMC}.items():
        with model:
            step = step_class()
            start = time.perf_counter()
            idata = pm.sample(
                step=step,
                tune=args.tune,
                draws=args.draws,
                chains=args.chains,
                cores=args.cores,
                random_seed=args.seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
        results[name] = summarize(idata, time.perf_counter() - start)

    nuts, rnshmc = results["NUTS"], results["RNSHMC"]
    mcse = np.sqrt(nuts["sd"] ** 2 / nuts["bulk"] + rnshmc["sd"] ** 2 / rnshmc["bulk"])
    rnshmc["max |dmean|/MCSE"] = np.max(np.abs(rnshmc["mean"] - nuts["mean"]) / mcse)
    columns = ["wall s", "draws s", "logps/draw", "grads/draw", "min bulk ESS", "bulk ESS/s"]
    columns += ["accept", "max |dmean|/MCSE"]
    print("\n" + " | ".join(["sampler".ljust(7)] + [c.rjust(12) for c in columns]))
    for name, result in results.items():
        cells = [f"{result[c]:12.3g}" if c in result else "-".rjust(12) for c in columns]
        print(" | ".join([name.ljust(7), *cells]))
    speedup = rnshmc["bulk ESS/s"] / nuts["bulk ESS/s"]
    print(f"\nRNSHMC / NUTS bulk ESS per second of draws: {speedup:.1f}x")


if __name__ == "__main__":
    main()
