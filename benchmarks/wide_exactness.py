"""Exactness of RNSHMC's default on the wide logistic regression, against an independent reference.

    python -m benchmarks.wide_exactness                          # d = 80, 160; seeds 1, 2; ~30 min
    python -m benchmarks.wide_exactness --dims 20 --seeds 1 --draws 500 --n 200 --output smoke

The reference is :class:`tests.logistic_reference.LogisticPosterior`: the posterior of
:func:`pymc_rnshmc.workloads.correlated_logistic_regression` by importance sampling from its
Laplace approximation (numpy and scipy, no Markov chain): weighted means and quantiles with their
own standard errors, and draws by sampling-importance-resampling. Per width and seed, two checks:

- **MCSE**: ``pm.sample(step=RNSHMC())`` with ``--chains`` chains of ``--tune`` + ``--draws``.
  Per coefficient, the mean's error in its MCSE (ArviZ's bulk ESS), with the reference mean's own
  standard error added in quadrature; and for the 5, 50 and 95 % quantiles, the share of draws
  below the reference quantile against ``p``, in the standard error of that share (the indicator's
  ESS) with the reference's own added. Every score is about standard normal if
  the sampler is right; reported are the largest ``|z|``, how many exceed 3 against the number
  expected (``P(|z| > 3) = 0.0027`` each), min bulk and tail ESS, max R-hat, the safety net's
  share and the share of exact fall-back draws.
- **Stationarity** (:func:`tests.stationarity.run_stationarity`): one chain tuned with
  ``--tune`` draws, then ``--n`` resampled reference draws, each pushed through ``k`` = 1 and 5
  transitions of the frozen step, compared with the posterior (means, variances, five quantiles per
  coefficient, and a two-sample KS test Bonferroni-combined over the coefficients).

Both pass with every ``|z| < 4.5`` (:data:`tests.stationarity.Z_LIMIT`) and, for stationarity, KS
``p > 1e-3``. The reference values come from a pool of 200,000 weighted proposals (effective size
about 170,000 at d = 80), which widens the stationarity scores' true spread by about
``sqrt(1 + n / 170000)`` (under 1 % at ``n`` = 2000); the MCSE scores include it. The resampled
draws repeat 1-2 % of their points, which the stationarity scores do not allow for.

Results: ``benchmarks/results/<output>.{json,md}``, written after every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from benchmarks.measure import cell, markdown_table, run_metadata, write_results
from pymc_rnshmc import RNSHMC
from tests.logistic_reference import LogisticPosterior
from tests.stationarity import Z_LIMIT, run_stationarity

QUANTILES = (0.05, 0.5, 0.95)
"""Quantiles checked in the MCSE check."""
BEYOND = 3.0
"""The ``|z|`` whose exceedances are counted, against ``2 Phi(-3) = 0.0027`` per score."""


def _ess(draws: np.ndarray, method: str) -> np.ndarray:
    """ArviZ's ESS of every column of ``(chain, draw, d)`` draws."""
    dataset = xr.Dataset({"x": (("chain", "draw", "dim"), draws)})
    return np.asarray(az.ess(dataset, method=method)["x"].values, dtype=float)


def mcse_scores(draws: np.ndarray, posterior: LogisticPosterior) -> dict[str, np.ndarray]:
    """Per coefficient, the errors of the mean and of three quantiles in their standard errors."""
    flat = draws.reshape(-1, draws.shape[-1])
    mean_error = np.sqrt(
        flat.var(axis=0, ddof=1) / _ess(draws, "bulk") + posterior.mean_standard_error**2
    )
    scores = {"mean": (flat.mean(axis=0) - posterior.mean) / mean_error}
    for p, reference in zip(QUANTILES, posterior.quantiles(QUANTILES), strict=True):
        below = (draws < reference).astype(float)
        ess = _ess(below, "mean")
        share = below.reshape(-1, draws.shape[-1]).mean(axis=0)
        error = np.sqrt(p * (1 - p) / ess + posterior.share_standard_error(p) ** 2)
        scores[f"q{p:g}"] = (share - p) / error
    return scores


def mcse_check(posterior: LogisticPosterior, seed: int, args) -> dict:
    model = posterior.model()
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            step=RNSHMC(),
            tune=args.tune,
            draws=args.draws,
            chains=args.chains,
            cores=args.cores,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    seconds = time.perf_counter() - start
    draws = np.asarray(idata.posterior["beta"].values)
    scores = mcse_scores(draws, posterior)
    every = np.concatenate(list(scores.values()))
    dataset = xr.Dataset({"x": (("chain", "draw", "dim"), draws)})
    stats = idata.sample_stats
    return {
        "max |z| mean": float(np.max(np.abs(scores["mean"]))),
        "max |z| quantile": float(max(np.max(np.abs(v)) for k, v in scores.items() if k[0] == "q")),
        "|z| > 3": int(np.sum(np.abs(every) > BEYOND)),
        "expected > 3": float(every.size * 0.0027),
        "min bulk ESS": float(_ess(draws, "bulk").min()),
        "min tail ESS": float(_ess(draws, "tail").min()),
        "max R-hat": float(np.max(az.rhat(dataset)["x"].values)),
        "net share": float(np.asarray(stats["safety_net"].values).mean()),
        "exact NUTS share": float(np.mean(np.asarray(stats["phase"].values) == 3)),
        "accept": float(np.nanmean(np.asarray(stats["accept"].values))),
        "mcse seconds": seconds,
        "scores": {name: values.tolist() for name, values in scores.items()},
    }


def stationarity_check(posterior: LogisticPosterior, seed: int, args) -> dict:
    run = run_stationarity(RNSHMC, posterior, n=args.n, tune=args.tune, seed=seed, k_values=(1, 5))
    row = {"phase": run.phase, "baseline max |z|": run.baseline.max_abs_z}
    for k, result in run.results.items():
        row[f"k={k} max |z|"] = result.max_abs_z
        row[f"k={k} worst"] = result.worst
        row[f"k={k} KS p"] = result.ks_pvalue
        row[f"k={k} moved"] = result.moved
        row[f"k={k} passed"] = result.passed
    row["stationarity seconds"] = run.tune_seconds + run.pushed.seconds
    return row


COLUMNS = (
    "d",
    "seed",
    "max |z| mean",
    "max |z| quantile",
    "|z| > 3",
    "expected > 3",
    "min bulk ESS",
    "min tail ESS",
    "max R-hat",
    "net share",
    "exact NUTS share",
    "k=1 max |z|",
    "k=1 KS p",
    "k=5 max |z|",
    "k=5 worst",
    "k=5 KS p",
    "k=5 moved",
    "baseline max |z|",
    "passed",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="80,160")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--n", type=int, default=2000, help="exact draws pushed")
    parser.add_argument("--output", default="wide_exactness")
    args = parser.parse_args()
    rows, references = [], {}
    for dim in (int(d) for d in args.dims.split(",")):
        start = time.perf_counter()
        posterior = LogisticPosterior(dim)
        for seed in (int(s) for s in args.seeds.split(",")):
            row = {"d": dim, "seed": seed}
            row.update(mcse_check(posterior, seed, args))
            row.update(stationarity_check(posterior, seed, args))
            row["passed"] = bool(
                max(row["max |z| mean"], row["max |z| quantile"]) < Z_LIMIT
                and row["k=1 passed"]
                and row["k=5 passed"]
            )
            rows.append(row)
            references[dim] = {
                "seconds": time.perf_counter() - start,
                "pool": len(posterior.pool),
                "effective pool": posterior.effective_pool,
            }
            print(" | ".join(cell(row[c]) for c in COLUMNS), flush=True)
            write_results(
                args.output,
                {"metadata": run_metadata(**vars(args)), "references": references, "runs": rows},
                _markdown(rows, references),
            )


def _markdown(rows: list[dict], references: dict) -> str:
    notes = [
        f"- d = {dim}: {ref['pool']} proposals, effective size {ref['effective pool']:.0f}"
        for dim, ref in references.items()
    ]
    lines = markdown_table(rows, COLUMNS)
    return "\n".join(lines) + "\n\nReference pools:\n" + "\n".join(notes) + "\n"


if __name__ == "__main__":
    main()
