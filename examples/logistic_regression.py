"""Sample the RNS-HMC paper's logistic regression with PyMC's NUTS, RNSHMC and ARNSHMC; compare.

    python examples/logistic_regression.py                      # d = 50, N = 20 000, 2 chains
    python examples/logistic_regression.py --n-obs 100000       # the paper's size
    python examples/logistic_regression.py --n-obs 500 --dim 5 --tune 300 --draws 200   # smoke

Prints, per sampler: wall time of the whole ``pm.sample`` call, time of the draws after tuning,
minimum bulk and tail ESS, ESS per second (of the draws and of the whole call), acceptance,
exact evaluations per draw, and how far the surrogate samplers' posterior means are from NUTS's
in Monte Carlo standard errors. ARNSHMC runs with half the tuning (``--arnshmc-tune``).
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

from pymc_rnshmc import ARNSHMC, RNSHMC
from pymc_rnshmc.workloads import logistic_regression


def summarize(idata, wall_seconds: float) -> dict:
    """Headline numbers of one ``pm.sample`` result."""
    stats = idata.sample_stats
    beta = idata.posterior["beta"]
    dataset = xr.Dataset({"beta": beta})
    bulk = np.asarray(az.ess(dataset, method="bulk")["beta"].values)
    tail = np.asarray(az.ess(dataset, method="tail")["beta"].values)
    sampling_seconds = float(stats["perf_counter_diff"].sum())
    acceptance = stats["accept"] if "accept" in stats else stats["acceptance_rate"]
    if "n_gradient_evals" in stats:
        gradients = float(stats["n_gradient_evals"].mean())
        logps = float(stats["n_logp_evals"].mean())
    else:  # PyMC NUTS: one joint logp-and-gradient evaluation per leapfrog step, plus the start
        gradients = logps = float(stats["n_steps"].mean()) + 1.0
    return {
        "wall s": wall_seconds,
        "draws s": sampling_seconds,
        "min bulk ESS": bulk.min(),
        "min tail ESS": tail.min(),
        "bulk ESS/s": bulk.min() / sampling_seconds,
        "whole ESS/s": bulk.min() / wall_seconds,
        "accept": float(acceptance.mean()),
        "grads/draw": gradients,
        "logps/draw": logps,
        "mean": beta.mean(("chain", "draw")).values,
        "sd": beta.std(("chain", "draw")).values,
        "bulk": bulk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--arnshmc-tune", type=int, help="default: half of --tune")
    args = parser.parse_args()
    steps = {"NUTS": pm.NUTS, "RNSHMC": RNSHMC, "ARNSHMC": ARNSHMC}
    tunes = dict.fromkeys(steps, args.tune)
    tunes["ARNSHMC"] = args.arnshmc_tune or args.tune // 2

    model = logistic_regression(n_obs=args.n_obs, dim=args.dim)
    print(f"Logistic regression: d = {args.dim}, N = {args.n_obs}, pymc {pm.__version__}")
    results = {}
    for name, step_class in steps.items():
        with model:
            step = step_class()
            start = time.perf_counter()
            idata = pm.sample(
                step=step,
                tune=tunes[name],
                draws=args.draws,
                chains=args.chains,
                cores=args.cores,
                random_seed=args.seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
        results[name] = summarize(idata, time.perf_counter() - start)

    columns = ["wall s", "draws s", "min bulk ESS", "min tail ESS", "bulk ESS/s", "whole ESS/s"]
    columns += ["accept", "grads/draw", "logps/draw"]
    print("\n" + " | ".join(["sampler".ljust(7)] + [c.rjust(12) for c in columns]))
    for name, result in results.items():
        cells = [f"{result[c]:12.3g}" for c in columns]
        print(" | ".join([name.ljust(7), *cells]))
    nuts = results["NUTS"]
    for name in ("RNSHMC", "ARNSHMC"):
        result = results[name]
        draws = result["bulk ESS/s"] / nuts["bulk ESS/s"]
        whole = result["whole ESS/s"] / nuts["whole ESS/s"]
        mcse = np.sqrt(nuts["sd"] ** 2 / nuts["bulk"] + result["sd"] ** 2 / result["bulk"])
        z = np.abs(result["mean"] - nuts["mean"]) / mcse
        print(
            f"\n{name} / NUTS bulk ESS per second of draws: {draws:.1f}x, of the whole call: "
            f"{whole:.1f}x (tune {tunes[name]} vs {tunes['NUTS']})\n"
            f"{name}: largest difference of posterior means from NUTS: {z.max():.2f} MCSE "
            f"(median {np.median(z):.2f})"
        )


if __name__ == "__main__":
    main()
