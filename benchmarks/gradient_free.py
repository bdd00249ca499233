"""Gradient-free samplers on a model without gradients: RNSHMC against PyMC's Slice, DEMetropolisZ
and SMC, per second of the whole call.

    python -m benchmarks.gradient_free                          # the elliptic PDE without adjoint
    python -m benchmarks.gradient_free --workload pharmacokinetics --method LSODA

Each sampler runs one chain (SMC: one run of ``--smc-draws`` particles) in this process, one after
another, with BLAS on one thread. Its whole ``pm.sample``/``pm.sample_smc`` call is timed; the
table gives the min bulk and tail ESS over the parameters, ESS per second of the call, log
densities per draw, and each sampler's ratio to the best baseline's bulk ESS per second. For
steps that time their draws (RNSHMC) it also gives ESS per second of the draws after tuning
alone: a bound on any whole call with that kernel, however cheap its tuning became. The
tuning lengths differ by sampler (``--*-tune``): each baseline gets what it needs to converge on
these posteriors, which is what a PyMC user would give it.

SMC gets the pharmacokinetic model whose failed solves have logp ``-inf`` (its weights cannot
take NaN); the others get the default (NaN, which they reject). RNSHMC runs twice: with its
default safety net (on the PDE, d = 20, 5 % of the draws after tuning are steps of the fixed
random walk; on the pharmacokinetic ODE 20 %) and without it (``safety_net=0``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from functools import partial

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.workloads import one_compartment_model
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde


def build(args, failed_solve: str = "nan") -> pm.Model:
    if args.workload == "pde":
        return elliptic_pde(n_cells=args.n_cells, gradient=False)
    return one_compartment_model(args.method, failed_solve)


def ess(idata, method: str) -> float:
    posterior = idata.posterior
    names = [name for name in posterior.data_vars if not name.endswith("__")]
    dataset = xr.Dataset({name: posterior[name] for name in names})
    return min(float(np.min(az.ess(dataset, method=method)[name].values)) for name in names)


def run_step(model, step_factory, tune: int, draws: int, seed: int):
    with model:
        start = time.perf_counter()
        idata = pm.sample(
            step=step_factory(),
            tune=tune,
            draws=draws,
            chains=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata, time.perf_counter() - start, draws


def run_smc(model, draws: int, seed: int):
    with model:
        start = time.perf_counter()
        idata = pm.sample_smc(draws=draws, chains=1, random_seed=seed, progressbar=False)
    return idata, time.perf_counter() - start, draws


def logps_per_draw(idata, name: str) -> float:
    stats = idata.sample_stats
    if "n_logp_evals" in stats:
        return float(stats["n_logp_evals"].mean())
    if name == "DEMetropolisZ":
        return 2.0  # PyMC's delta_logp evaluates both ends of every proposal
    return float("nan")  # Slice and SMC do not report their evaluations


def draw_seconds(idata) -> float:
    """Seconds in the draws after tuning, from the step's own timers (NaN where it keeps none)."""
    stats = idata.sample_stats
    if "perf_counter_diff" not in stats:
        return float("nan")
    return float(stats["perf_counter_diff"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["pde", "pharmacokinetics"], default="pde")
    parser.add_argument("--n-cells", type=int, default=30)
    parser.add_argument("--method", default="BDF")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--rnshmc-tune", type=int, default=1000)
    parser.add_argument("--slice-tune", type=int, default=500)
    parser.add_argument("--demz-tune", type=int, default=5000)
    parser.add_argument("--demz-draws", type=int, default=5000)
    parser.add_argument("--smc-draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    runs = {
        "Slice": lambda m: run_step(m, pm.Slice, args.slice_tune, args.draws, args.seed),
        "DEMetropolisZ": lambda m: run_step(
            m, pm.DEMetropolisZ, args.demz_tune, args.demz_draws, args.seed
        ),
        "SMC": lambda m: run_smc(build(args, failed_solve="-inf"), args.smc_draws, args.seed),
        "RNSHMC": lambda m: run_step(m, RNSHMC, args.rnshmc_tune, args.draws, args.seed),
        "RNSHMC without safety net": lambda m: run_step(
            m, partial(RNSHMC, safety_net=0.0), args.rnshmc_tune, args.draws, args.seed
        ),
    }
    rows = {}
    for name, run in runs.items():
        try:
            idata, wall, draws = run(build(args))
        except Exception as err:  # a baseline that cannot sample this model is reported so
            print(f"{name} failed: {type(err).__name__}: {err}", flush=True)
            continue
        bulk, tail = ess(idata, "bulk"), ess(idata, "tail")
        rows[name] = {
            "whole call s": wall,
            "draws": draws,
            "min bulk ESS": bulk,
            "min tail ESS": tail,
            "bulk ESS/s": bulk / wall,
            "tail ESS/s": tail / wall,
            "logps/draw": logps_per_draw(idata, name),
            "draws s": draw_seconds(idata),
        }
        rows[name]["bulk ESS/s of draws"] = bulk / rows[name]["draws s"]
        rows[name]["tail ESS/s of draws"] = tail / rows[name]["draws s"]
        print(name, {key: round(value, 3) for key, value in rows[name].items()}, flush=True)
    best = max(
        (row["bulk ESS/s"], name) for name, row in rows.items() if not name.startswith("RNSHMC")
    )
    columns = list(rows["RNSHMC"])
    print("| sampler | " + " | ".join(columns) + " | bulk ESS/s vs best baseline |")
    print("|---" * (len(columns) + 2) + "|")
    for name, row in rows.items():
        ratio = row["bulk ESS/s"] / best[0]
        cells = " | ".join(f"{row[column]:.4g}" for column in columns)
        print(f"| {name} | {cells} | {ratio:.2f} |")
    print(f"best baseline: {best[1]}")


if __name__ == "__main__":
    main()
