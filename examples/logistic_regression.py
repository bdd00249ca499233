"""Sample the RNS-HMC paper's logistic regression with NUTS, RNSHMC and ARNSHMC, and compare.

    python examples/logistic_regression.py                      # d = 50, N = 20 000, 2 chains
    python examples/logistic_regression.py --n-obs 100000       # the paper's size
    python examples/logistic_regression.py --n-obs 500 --dim 5 --tune 300 --draws 200   # smoke

One call of :func:`pymc_rnshmc.compare_samplers` runs PyMC's NUTS, nutpie (when installed),
``RNSHMC`` and ``ARNSHMC`` with the same tuning, draws and seed, and prints its table: wall time
of the whole ``pm.sample`` call and of the draws after tuning, ESS (ArviZ) and ESS per second of
each, exact evaluations per draw, acceptance, divergences, and how far each posterior mean is
from NUTS's in Monte Carlo standard errors. ``--figures DIR`` also saves its two figures.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one BLAS thread: multithreaded BLAS slows logp
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pymc as pm

from pymc_rnshmc import ARNSHMC, RNSHMC, compare_samplers
from pymc_rnshmc.comparison import NUTS_NAME
from pymc_rnshmc.workloads import logistic_regression


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-nutpie", action="store_true", help="leave nutpie out")
    parser.add_argument("--figures", type=Path, help="save the ESS and error figures here")
    args = parser.parse_args()

    model = logistic_regression(n_obs=args.n_obs, dim=args.dim)
    print(f"Logistic regression: d = {args.dim}, N = {args.n_obs}, pymc {pm.__version__}")
    comparison = compare_samplers(
        model,
        samplers={"RNSHMC": RNSHMC, "ARNSHMC": ARNSHMC},
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        cores=args.cores,
        random_seed=args.seed,
        nutpie=False if args.no_nutpie else None,
        progressbar=False,
    )
    print(comparison)
    table = comparison.table
    for name in ("RNSHMC", "ARNSHMC"):
        draws = table.loc[name, "bulk ESS/s (draws)"] / table.loc[NUTS_NAME, "bulk ESS/s (draws)"]
        call = table.loc[name, "bulk ESS/s (call)"] / table.loc[NUTS_NAME, "bulk ESS/s (call)"]
        print(
            f"\n{name} / NUTS bulk ESS per second of draws: {draws:.1f}x, of the whole call: "
            f"{call:.1f}x; largest difference of posterior means from NUTS: "
            f"{table.loc[name, 'max |dmean| (MCSE)']:.2f} MCSE"
        )
    if args.figures is not None:
        args.figures.mkdir(parents=True, exist_ok=True)
        comparison.plot_ess().figure.savefig(
            args.figures / "ess_per_second.png", dpi=120, bbox_inches="tight"
        )
        comparison.plot_error_vs_time().figure.savefig(
            args.figures / "error_vs_time.png", dpi=120, bbox_inches="tight"
        )
        print(f"figures saved in {args.figures}")


if __name__ == "__main__":
    main()
