"""Hierarchical posteriors: is a surrogate sampler ever confidently wrong where NUTS struggles?

    python -m benchmarks.hierarchical                      # three workloads, every sampler
    python -m benchmarks.hierarchical --workloads funnel --samplers RNSHMC --seed 2

Workloads: the eight schools, centred and non-centred (one posterior of ``mu``, ``tau`` and
``theta``, compared with posteriordb's 10 000 Stan draws), and Neal's funnel in ten dimensions
(``v`` exactly ``N(0, 3)``). Each sampler runs through :func:`pymc_rnshmc.compare_samplers` with
PyMC's NUTS, the same tuning, draws, chains and seed.

Per run the table gives the largest ``|z|`` of a reference mean or sd (the run's Monte Carlo
standard error combined with the reference's), min bulk ESS, the largest R-hat and the
divergences. A run is **flagged** when PyMC's own checks would warn (R-hat above 1.01, fewer than
100 bulk ESS per chain, or any divergence after tuning) and **wrong** when ``|z| > 4``; a
**confident wrong answer** is a wrong run that is not flagged, the failure the issue asks us to
rule out. Results go to ``benchmarks/results/hierarchical.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import xarray as xr

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, SparseGridHMC, compare_samplers
from pymc_rnshmc.workloads import (
    eight_schools_centered,
    eight_schools_noncentered,
    neals_funnel,
)
from pymc_rnshmc.workloads.posteriordb import load_posterior, reference_parameter

POSTERIORDB = Path(__file__).resolve().parents[1] / "tests/data/posteriordb"
FUNNEL_SCALE = 3.0
WRONG = 4.0
"""``|z|`` above which a run's mean or sd disagrees with the reference."""
SAMPLERS = {
    "RNSHMC": RNSHMC,
    "ARNSHMC": ARNSHMC,
    "RNSRMHMC": RNSRMHMC,
    "SparseGridHMC": SparseGridHMC,
}


def eight_schools_reference() -> dict:
    """``{name: (mean, sd, mcse of the mean)}`` of ``mu``, ``tau`` and ``theta[j]`` (Stan)."""
    _, summary = load_posterior("eight_schools-eight_schools_noncentered", POSTERIORDB)
    return {
        name: (mean, sd, mcse)
        for name, mean, sd, mcse in zip(
            summary["names"], summary["mean"], summary["sd"], summary["mcse_mean"], strict=True
        )
    }


def funnel_reference() -> dict:
    """``v ~ N(0, 3)`` exactly (its Monte Carlo error is zero)."""
    return {"v": (0.0, FUNNEL_SCALE, 0.0)}


WORKLOADS = {
    "eight_schools_centered": (eight_schools_centered, eight_schools_reference),
    "eight_schools_noncentered": (eight_schools_noncentered, eight_schools_reference),
    "funnel": (lambda: neals_funnel(10, FUNNEL_SCALE), funnel_reference),
}


def largest_z(posterior, reference: dict) -> tuple[float, str]:
    """The largest ``|z|`` of a mean or sd against the reference, and which one."""
    worst, where = 0.0, ""
    for name, (mean, sd, reference_mcse) in reference.items():
        draws = np.asarray(reference_parameter(posterior, name), dtype=float)
        dataset = xr.Dataset({"x": (("chain", "draw"), draws)})
        mcse_mean = float(az.mcse(dataset, method="mean")["x"])
        mcse_sd = float(az.mcse(dataset, method="sd")["x"])
        z_mean = (draws.mean() - mean) / np.hypot(mcse_mean, reference_mcse)
        z_sd = (draws.std(ddof=1) - sd) / mcse_sd
        for label, z in ((f"mean {name}", z_mean), (f"sd {name}", z_sd)):
            if abs(z) > abs(worst):
                worst, where = float(z), label
    return worst, where


def verdict(trace, row, chains: int, reference: dict) -> dict:
    """Reference agreement and what PyMC's checks say about one run."""
    posterior = trace["posterior"]
    z, where = largest_z(posterior, reference)
    r_hat = az.rhat(xr.Dataset({k: posterior[k] for k in posterior.data_vars}))
    largest_r_hat = float(max(np.nanmax(np.asarray(r_hat[k])) for k in r_hat.data_vars))
    flagged = bool(
        largest_r_hat > 1.01 or row["min bulk ESS"] / chains < 100 or row["divergences"] > 0
    )
    wrong = abs(z) > WRONG
    return {
        "largest_z": z,
        "largest_z_of": where,
        "largest_r_hat": largest_r_hat,
        "flagged": flagged,
        "wrong": wrong,
        "confident_wrong": wrong and not flagged,
    }


def run_workload(name: str, samplers: dict, args) -> list[dict]:
    build, reference = WORKLOADS[name]
    comparison = compare_samplers(
        build(),
        samplers=samplers,
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        random_seed=args.seed,
        nutpie=False,
        progressbar=False,
    )
    rows = []
    for sampler, run in comparison.runs.items():
        row = comparison.table.loc[sampler]
        rows.append(
            {
                "workload": name,
                "sampler": sampler,
                "whole_call_s": float(row["whole call s"]),
                "min_bulk_ess": float(row["min bulk ESS"]),
                "bulk_ess_per_s_call": float(row["bulk ESS/s (call)"]),
                "divergences": int(row["divergences"]),
                "accept": float(row["accept"]),
                **verdict(run.trace, row, args.chains, reference()),
            }
        )
        print(rows[-1], flush=True)
    for sampler, why in comparison.skipped.items():
        rows.append({"workload": name, "sampler": sampler, "skipped": why})
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"`{meta}`",
        "",
        "| workload | sampler | whole call s | min bulk ESS | ESS/s (call) | divergences | "
        "largest R-hat | largest \\|z\\| (of) | flagged by PyMC's checks | confident wrong |",
        "|---" * 10 + "|",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['workload']} | {r['sampler']} | skipped: {r['skipped']} |")
            continue
        lines.append(
            f"| {r['workload']} | {r['sampler']} | {r['whole_call_s']:.1f} | "
            f"{r['min_bulk_ess']:.0f} | {r['bulk_ess_per_s_call']:.3g} | {r['divergences']} | "
            f"{r['largest_r_hat']:.3f} | {r['largest_z']:+.1f} ({r['largest_z_of']}) | "
            f"{'yes' if r['flagged'] else 'no'} | {'**YES**' if r['confident_wrong'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default="hierarchical")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    samplers = {name: SAMPLERS[name] for name in args.samplers.split(",")}
    rows = []
    for workload in args.workloads.split(","):
        rows += run_workload(workload, samplers, args)
    meta = run_metadata(tune=args.tune, draws=args.draws, chains=args.chains, seed=args.seed)
    text = markdown(rows, meta)
    print(text)
    write_results(args.output, {"meta": meta, "rows": rows}, text)


if __name__ == "__main__":
    main()
