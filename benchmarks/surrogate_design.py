"""Which surrogate design choices matter, measured on the paper's logistic regression.

    python -m benchmarks.surrogate_design                 # N = 10 000 (workload B), d = 50
    python -m benchmarks.surrogate_design --n-obs 1000 --tune 300 --draws 100 --output smoke

For each variant of the random network surrogate (values only or values and gradients, with or
without the quadratic base, several widths) this samples with ``RNSHMC(surrogate=variant)`` and
reports the fit time, the gradient error on held-out NUTS posterior draws, the acceptance and the
minimum bulk ESS per second of the draws after tuning (measured by
:func:`pymc_rnshmc.comparison.comparison_table`). Writes
``benchmarks/results/surrogate_design.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse
import json
from pathlib import Path

import numpy as np
import pymc as pm

from pymc_rnshmc import RNSHMC, RandomNetworkSurrogate
from pymc_rnshmc.comparison import comparison_table, run_sampler
from pymc_rnshmc.workloads import logistic_regression

RESULTS = Path(__file__).parent / "results"


class ValuesOnly(RandomNetworkSurrogate):
    """The paper's fit: exact potentials only, the gradients it was given are ignored.

    Its hidden weights keep the unit scale (pass ``weight_scale``), as the paper's do.
    """

    def fit(self, positions, potentials, gradients=None, rng=None):
        return super().fit(positions, potentials, None, rng=rng)


VARIANTS = {
    "values only, s=2000 (paper)": lambda: ValuesOnly(
        n_hidden=2000, quadratic=False, weight_scale=1.0
    ),
    "values+gradients, s=500": lambda: RandomNetworkSurrogate(
        n_hidden=500, quadratic=False, weight_scale=1.0
    ),
    "values+gradients, s=2000": lambda: RandomNetworkSurrogate(
        n_hidden=2000, quadratic=False, weight_scale=1.0
    ),
    "quadratic + network, s=500": lambda: RandomNetworkSurrogate(n_hidden=500),
    "quadratic + network, s=2000": lambda: RandomNetworkSurrogate(n_hidden=2000),
    "quadratic + network, s chosen on held-out (default)": lambda: RandomNetworkSurrogate(),
}


def held_out_set(model, draws: int, seed: int):
    """NUTS posterior draws with their exact potential gradients, as a test set."""
    with model:
        idata = pm.sample(
            step=pm.NUTS(),
            tune=1000,
            draws=draws,
            chains=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        function = model.logp_dlogp_function(ravel_inputs=True)
        function.set_extra_values({})
    positions = np.asarray(idata.posterior["beta"].values[0])
    gradients = np.stack([-function._pytensor_function(q)[1] for q in positions])
    return positions, gradients


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-obs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--output", default="surrogate_design", help="result file stem")
    args = parser.parse_args()
    model = logistic_regression(n_obs=args.n_obs)
    test_positions, test_gradients = held_out_set(model, 300, args.seed + 100)
    spread = np.mean(np.sum((test_gradients - test_gradients.mean(0)) ** 2, axis=1))
    rows = []
    for name, make in VARIANTS.items():
        sampled = run_sampler(
            lambda make=make: RNSHMC(surrogate=make()),
            model,
            name=name,
            tune=args.tune,
            draws=args.draws,
            chains=1,
            random_seed=args.seed,
            progressbar=False,
        )
        surrogate = sampled.step.surrogate
        predicted = surrogate.gradient(test_positions)
        error = np.sqrt(np.mean(np.sum((predicted - test_gradients) ** 2, axis=1)) / spread)
        measured = comparison_table({name: sampled}).loc[name]
        rows.append(
            {
                "variant": name,
                "fit_seconds": surrogate.report.seconds,
                "n_hidden": surrogate.report.n_hidden,
                "test_gradient_error": float(error),
                "accept": float(measured["accept"]),
                "min_bulk_ess": float(measured["min bulk ESS"]),
                "min_tail_ess": float(measured["min tail ESS"]),
                "bulk_ess_per_second": float(measured["bulk ESS/s (draws)"]),
                "ms_per_draw": 1e3 * sampled.draw_seconds / sampled.finish_seconds.size,
            }
        )
        print(rows[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.output}.json").write_text(json.dumps(rows, indent=2))
    header = "| variant | s | fit s | held-out gradient error | accept | min bulk ESS | "
    header += "min tail ESS | bulk ESS/s | ms/draw |"
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['n_hidden']} | {row['fit_seconds']:.2f} | "
            f"{row['test_gradient_error']:.3f} "
            f"| {row['accept']:.2f} | {row['min_bulk_ess']:.0f} | {row['min_tail_ess']:.0f} | "
            f"{row['bulk_ess_per_second']:.0f} | {row['ms_per_draw']:.2f} |"
        )
    (RESULTS / f"{args.output}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
