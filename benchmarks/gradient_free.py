"""Gradient-free samplers on a model without gradients: RNSHMC against PyMC's Slice, DEMetropolisZ
and SMC, per second of the whole call.

    python -m benchmarks.gradient_free                          # the elliptic PDE without adjoint
    python -m benchmarks.gradient_free --workload pharmacokinetics --method LSODA

Each sampler runs one chain (SMC: one run of ``--smc-draws`` particles) in this process, one after
another, with BLAS on one thread. Its whole ``pm.sample``/``pm.sample_smc`` call is timed (from
before the step is built); the table gives the min bulk and tail ESS over the parameters, ESS
per second of the call, log densities per draw (the measurements of
:func:`pymc_rnshmc.comparison.comparison_table`), and each sampler's ratio to the best
baseline's bulk ESS per second. For
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

import pymc as pm

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.comparison import SamplerRun, comparison_table, posterior_coordinates, run_sampler
from pymc_rnshmc.workloads import one_compartment_model
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde


def build(args, failed_solve: str = "nan") -> pm.Model:
    if args.workload == "pde":
        return elliptic_pde(n_cells=args.n_cells, gradient=False)
    return one_compartment_model(args.method, failed_solve)


SAMPLERS = ("Slice", "DEMetropolisZ", "SMC", "RNSHMC", "RNSHMC without safety net")


def sample(name: str, args) -> SamplerRun:
    """One sampler's run on a freshly built model."""
    if name == "SMC":
        return run_smc(build(args, failed_solve="-inf"), args.smc_draws, args.seed)
    step, tune, draws = {
        "Slice": (pm.Slice, args.slice_tune, args.draws),
        "DEMetropolisZ": (pm.DEMetropolisZ, args.demz_tune, args.demz_draws),
        "RNSHMC": (RNSHMC, args.rnshmc_tune, args.draws),
        "RNSHMC without safety net": (
            partial(RNSHMC, safety_net=0.0),
            args.rnshmc_tune,
            args.draws,
        ),
    }[name]
    return run_sampler(
        step,
        build(args),
        name=name,
        tune=tune,
        draws=draws,
        chains=1,
        random_seed=args.seed,
        progressbar=False,
    )


def run_smc(model, draws: int, seed: int) -> SamplerRun:
    """``pm.sample_smc``, timed as a whole; it keeps no per-draw timers."""
    with model:
        start = time.perf_counter()
        idata = pm.sample_smc(draws=draws, chains=1, random_seed=seed, progressbar=False)
    return SamplerRun("SMC", idata, time.perf_counter() - start, float("nan"), started=start)


def measured_row(name: str, sampled: SamplerRun) -> dict:
    """The table's cells of one run (the package's measurements, under this table's names)."""
    measured = comparison_table({name: sampled}).loc[name]
    logps = float(measured["logp evals/draw"])
    if name == "DEMetropolisZ":
        logps = 2.0  # PyMC's delta_logp evaluates both ends of every proposal
    return {
        "whole call s": float(measured["whole call s"]),
        "draws": posterior_coordinates(sampled.trace.posterior).shape[1],
        "min bulk ESS": float(measured["min bulk ESS"]),
        "min tail ESS": float(measured["min tail ESS"]),
        "bulk ESS/s": float(measured["bulk ESS/s (call)"]),
        "tail ESS/s": float(measured["tail ESS/s (call)"]),
        "logps/draw": logps,  # NaN for Slice and SMC, which do not report their evaluations
        "draws s": float(measured["draws s"]),
        "bulk ESS/s of draws": float(measured["bulk ESS/s (draws)"]),
        "tail ESS/s of draws": float(measured["tail ESS/s (draws)"]),
    }


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
    rows = {}
    for name in SAMPLERS:
        try:
            sampled = sample(name, args)
        except Exception as err:  # a baseline that cannot sample this model is reported so
            print(f"{name} failed: {type(err).__name__}: {err}", flush=True)
            continue
        rows[name] = measured_row(name, sampled)
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
