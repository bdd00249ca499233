"""RNSRMHMC against RNSHMC and PyMC's NUTS: the RNS-HMC paper's Table 1 workloads and funnels.

    python -m benchmarks.riemannian --workload funnel              # Neal's funnel, d = 10
    python -m benchmarks.riemannian --workload eight_schools       # centred, d = 10
    python -m benchmarks.riemannian --workload logistic_regression # paper section 5.1, d = 50
    python -m benchmarks.riemannian --workload pde                 # paper section 5.3, d = 20

Every sampler runs ``--chains`` chains one after another in this process (BLAS on one thread),
with the same tuning, draws and seed. The table gives the whole ``pm.sample`` call (its clock
started before the step is built) and the draws after tuning (their own timers), min bulk and
tail ESS over every coordinate, ESS per second of each, divergences, exact acceptance (the
measurements of :func:`pymc_rnshmc.comparison.comparison_table`) and, for RNSRMHMC, fixed-point
iterations per step and trajectories rejected as unconverged or irreversible. The metric of
RNSRMHMC is the paper's for each workload: the Hessian (SoftAbs) where the potential is convex
or nearly so, its diagonal for the elliptic PDE. Results go to
``benchmarks/results/riemannian_<workload>``.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import RNSHMC, RNSRMHMC
from pymc_rnshmc.comparison import SamplerRun, comparison_table, run_sampler
from pymc_rnshmc.workloads import eight_schools_centered, logistic_regression, neals_funnel
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde

WORKLOADS = {
    "funnel": (lambda: neals_funnel(10), "softabs"),
    "eight_schools": (eight_schools_centered, "softabs"),
    "logistic_regression": (logistic_regression, "softabs"),
    "pde": (lambda: elliptic_pde(n_cells=30), "diagonal"),
}


def samplers(metric: str) -> dict:
    return {
        "PyMC NUTS": "pymc",
        "RNSHMC": RNSHMC,
        "RNSRMHMC": lambda: RNSRMHMC(metric=metric),
    }


def row(name: str, sampled: SamplerRun) -> dict:
    stats = sampled.trace.sample_stats
    measured = comparison_table({name: sampled}).loc[name]
    entry = {
        "sampler": name,
        "whole_call_s": float(measured["whole call s"]),
        "draws_s": float(measured["draws s"]),
        "min_bulk_ess": float(measured["min bulk ESS"]),
        "min_tail_ess": float(measured["min tail ESS"]),
        "divergences": int(measured["divergences"]),
        "accept": float(measured["accept"]),
    }
    for kind in ("bulk", "tail"):
        entry[f"{kind}_ess_per_s_call"] = float(measured[f"{kind} ESS/s (call)"])
        entry[f"{kind}_ess_per_s_draws"] = float(measured[f"{kind} ESS/s (draws)"])
    if "fixed_point_iterations" in stats:
        entry["fixed_point_iterations"] = float(np.nanmean(stats["fixed_point_iterations"].values))
        entry["unconverged"] = int(stats["unconverged"].values.sum())
        entry["irreversible"] = int(stats["irreversible"].values.sum())
    if "used_surrogate" in stats:
        entry["surrogate_draws"] = float(stats["used_surrogate"].values.mean())
    posterior = sampled.trace.posterior
    if "v" in posterior:  # the funnel: the exact quantiles of v are -4.93 and 4.93
        entry["v_q05_q95"] = [float(q) for q in np.quantile(posterior["v"].values, [0.05, 0.95])]
    return entry


def markdown(rows: list, meta: dict) -> str:
    header = (
        "| sampler | whole call s | draws s | min bulk / tail ESS | ESS/s of the call | "
        "ESS/s of the draws | divergences | accept | surrogate draws | fixed-point its / step "
        "| unconverged / irreversible |"
    )
    lines = [f"`{meta}`", "", header, "|---" * 11 + "|"]
    for entry in rows:
        lines.append(
            f"| {entry['sampler']} | {entry['whole_call_s']:.1f} | {entry['draws_s']:.2f} | "
            f"{entry['min_bulk_ess']:.0f} / {entry['min_tail_ess']:.0f} | "
            f"{entry['bulk_ess_per_s_call']:.3g} / {entry['tail_ess_per_s_call']:.3g} | "
            f"{entry['bulk_ess_per_s_draws']:.3g} / {entry['tail_ess_per_s_draws']:.3g} | "
            f"{entry['divergences']} | {entry['accept']:.2f} | "
            f"{entry.get('surrogate_draws', float('nan')):.2f} | "
            f"{entry.get('fixed_point_iterations', float('nan')):.1f} | "
            f"{entry.get('unconverged', '-')} / {entry.get('irreversible', '-')} |"
        )
    quantiles = [
        f"{e['sampler']}: {e['v_q05_q95'][0]:.2f}, {e['v_q05_q95'][1]:.2f}"
        for e in rows
        if "v_q05_q95" in e
    ]
    if quantiles:
        lines += ["", "5 % / 95 % quantiles of v (exact: -4.93, 4.93): " + "; ".join(quantiles)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="funnel")
    parser.add_argument("--samplers", default="PyMC NUTS,RNSHMC,RNSRMHMC")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    build, metric = WORKLOADS[args.workload]
    factories = samplers(metric)
    rows = []
    for name in args.samplers.split(","):
        sampled = run_sampler(
            factories[name],
            build(),
            name=name,
            tune=args.tune,
            draws=args.draws,
            chains=args.chains,
            random_seed=args.seed,
            progressbar=False,
        )
        rows.append(row(name, sampled))
        print(rows[-1], flush=True)
    meta = run_metadata(
        workload=args.workload,
        metric=metric,
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        seed=args.seed,
    )
    text = markdown(rows, meta)
    print(text)
    write_results(f"riemannian_{args.workload}", {"meta": meta, "rows": rows}, text)


if __name__ == "__main__":
    main()
