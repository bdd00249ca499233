"""Curved and heavy-tailed posteriors with pure defaults: is a run ever confidently wrong?

    python -m benchmarks.trust_battery                                # everything, 4 seeds
    python -m benchmarks.trust_battery --posteriors banana --seeds 1 --draws 2000   # smoke
    python -m benchmarks.trust_battery --dynamics hmc --ceiling --output trust_ceiling
    python -m benchmarks.trust_battery --coarse wrong --output trust_wrong_coarse
    python -m benchmarks.trust_battery --sampler SparseGridHMC --output trust_sparse_grid
    python -m benchmarks.trust_battery --sampler NUTS --posteriors banana --output trust_nuts

Every posterior has an exact reference (quadrature or a closed form). ``RNSHMC()`` (or
``--sampler``) with its defaults, both dynamics where it takes them, runs ``--chains`` chains of
``--tune`` + ``--draws`` (default 2 x (1000 + 10 000), one core) per seed. Per run: the largest
``|z|`` of a mean and of a 1 % / 5 % / 95 % / 99 % quantile (the quantile's error from the ESS
of its indicator, as ArviZ's ``mcse(method="quantile")``), min bulk and tail ESS, the largest
R-hat, divergences, the share of draws in the region the surrogate is likeliest to wall off, and
whether the sampler warned. A run is **flagged** when PyMC's own checks would warn (R-hat above
1.01, bulk ESS below 100 per chain, a divergence) or a SurrogateWarning was raised, and
**wrong** when a mean is more than ``WRONG`` MCSE off; a **confident wrong answer** is wrong and
not flagged.

The posteriors are split in three: ``tune`` (the banana of the issue that found the problem,
on which the defaults were chosen), ``check`` (held out: nothing was chosen on them) and
``check_new``, added after the defaults were last changed and never used to choose anything:
Neal's centred funnel at two scales (``funnel``: ``v ~ N(0, 1.5)``; ``funnel-neal``:
``N(0, 3)``, where PyMC's NUTS is known to miss the neck), a ring (``|b|`` normal about 3), two
modes (a fifth of the mass in a narrower mode 3.5 away) and a U-shaped ``Beta(0.4, 0.4)``.
Results go to ``benchmarks/results/<output>.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr
from scipy import stats

from benchmarks.measure import cell, markdown_table, run_metadata, write_results
from pymc_rnshmc import (
    ARNSHMC,
    RNSHMC,
    RNSRMHMC,
    RandomNetworkSurrogate,
    SparseGridHMC,
    SurrogateWarning,
)
from tests.step_methods.helpers import WrongCoarseModel

WRONG = 5.0
"""``|z|`` of a mean above which a run is wrong (the issue's bar)."""
QUANTILES = (0.01, 0.05, 0.95, 0.99)


@dataclass(frozen=True)
class Reference:
    """A posterior with its exact reference: per coordinate the mean, sd and quantiles."""

    name: str
    split: str
    build: Callable[[], pm.Model]
    variable: str
    means: np.ndarray
    quantiles: np.ndarray  # (len(QUANTILES), d)
    tail_region: Callable[[np.ndarray], np.ndarray]
    """``(n, d) -> bool``: the region a surrogate fitted on an early exploration misses."""


def _grid_reference(log_density, axis) -> tuple[np.ndarray, np.ndarray]:
    """Means and quantiles of a 2-d density known up to a constant, by quadrature."""
    first, second = np.meshgrid(axis, axis, indexing="ij")
    log_weights = log_density(first, second)
    weights = np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    marginals = [weights.sum(axis=1), weights.sum(axis=0)]
    means = np.array([np.sum(m * axis) for m in marginals])
    quantiles = np.array([[np.interp(q, np.cumsum(m), axis) for m in marginals] for q in QUANTILES])
    return means, quantiles


def banana_reference(name: str, split: str, data_seed: int, n_obs: int, sigma: float):
    """``b ~ N(0, I_2)``, ``y ~ N(b1 + b2^2, sigma)``: curved, with a one-sided tail in b1."""
    data = 1.0 + sigma * np.random.default_rng(data_seed).normal(size=n_obs)

    def log_density(b1, b2):
        location = b1 + b2**2
        residual = np.sum(data**2) - 2 * location * data.sum() + n_obs * location**2
        return -residual / (2 * sigma**2) - 0.5 * (b1**2 + b2**2)

    def build():
        with pm.Model() as model:
            b = pm.Normal("b", 0.0, 1.0, shape=2)
            pm.Normal("y", b[0] + b[1] ** 2, sigma, observed=data)
        return model

    means, quantiles = _grid_reference(log_density, np.linspace(-7.0, 7.0, 2801))
    return Reference(name, split, build, "b", means, quantiles, lambda b: np.abs(b[:, 1]) > 1.5)


def log_gamma_reference() -> Reference:
    """``g ~ Gamma(0.5, 1)`` sampled as ``log g``: a one-sided, exponential left tail."""

    def build():
        with pm.Model() as model:
            pm.Gamma("g", 0.5, 1.0, shape=2)
        return model

    posterior = stats.gamma(0.5)
    means = np.full(2, posterior.mean())
    quantiles = np.array([[posterior.ppf(q)] * 2 for q in QUANTILES])
    return Reference(
        "log-gamma", "check", build, "g", means, quantiles, lambda g: np.any(g < 1e-3, axis=1)
    )


def student_t_reference(dim: int = 4, nu: float = 3.0) -> Reference:
    """Independent Student-t with 3 degrees of freedom: heavy tails on both sides."""

    def build():
        with pm.Model() as model:
            pm.StudentT("x", nu=nu, mu=0.0, sigma=1.0, shape=dim)
        return model

    posterior = stats.t(nu)
    quantiles = np.array([[posterior.ppf(q)] * dim for q in QUANTILES])
    return Reference(
        "student-t",
        "check",
        build,
        "x",
        np.zeros(dim),
        quantiles,
        lambda x: np.any(np.abs(x) > 5.0, axis=1),
    )


def funnel_reference(name: str = "funnel", scale: float = 1.5) -> Reference:
    """Neal's funnel, centred, in two dimensions: ``v ~ N(0, scale)``, ``x ~ N(0, exp(v / 2))``.

    The neck (``v`` low, ``x`` squeezed) is where a surrogate fitted on the bulk, and NUTS with
    one step size, are likeliest to fail. ``x``'s quantiles solve its CDF, a normal mixture
    integrated over ``v`` by Gauss-Hermite quadrature.
    """

    def build():
        with pm.Model() as model:
            b = pm.Flat("b", shape=2)  # (v, x), one variable as the battery reads it
            v_part = pm.logp(pm.Normal.dist(0.0, scale), b[0])
            pm.Potential(
                "funnel", v_part + pm.logp(pm.Normal.dist(0.0, pm.math.exp(b[0] / 2)), b[1])
            )
        return model

    nodes, weights = np.polynomial.hermite_e.hermegauss(200)
    weights = weights / weights.sum()

    def x_cdf(value: float) -> float:
        return float(np.sum(weights * stats.norm.cdf(value / np.exp(scale * nodes / 2))))

    def x_quantile(quantile: float) -> float:
        from scipy.optimize import brentq

        return brentq(lambda value: x_cdf(value) - quantile, -1e3, 1e3, xtol=1e-10)

    quantiles = np.array([[stats.norm(0, scale).ppf(q), x_quantile(q)] for q in QUANTILES])
    return Reference(
        name, "check_new", build, "b", np.zeros(2), quantiles, lambda b: b[:, 0] < -2 * scale
    )


def ring_reference(radius: float = 3.0, width: float = 0.3) -> Reference:
    """A ring in two dimensions, ``|b| ~ N(radius, width)`` in log density: curved all round."""

    def log_density(b1, b2):
        return -((np.hypot(b1, b2) - radius) ** 2) / (2 * width**2)

    def build():
        with pm.Model() as model:
            b = pm.Flat("b", shape=2, initval=np.array([radius, 0.0]))
            pm.Potential(
                "ring", -((pm.math.sqrt(b[0] ** 2 + b[1] ** 2) - radius) ** 2) / (2 * width**2)
            )
        return model

    means, quantiles = _grid_reference(log_density, np.linspace(-5.0, 5.0, 2001))
    outer = radius + 2 * width
    return Reference(
        "ring", "check_new", build, "b", means, quantiles, lambda b: np.hypot(*b.T) > outer
    )


def two_modes_reference(weight: float = 0.2, distance: float = 3.5, width: float = 0.5):
    """A mixture in two dimensions: ``N(0, I)`` and, with ``weight``, a narrower mode beside it.

    A surrogate fitted on an exploration of the main mode may wall the small one off.
    """

    def log_density(b1, b2):
        main = np.log1p(-weight) - 0.5 * (b1**2 + b2**2)
        side = np.log(weight) - 2 * np.log(width) - ((b1 - distance) ** 2 + b2**2) / (2 * width**2)
        return np.logaddexp(main, side)

    def build():
        with pm.Model() as model:
            b = pm.Flat("b", shape=2)
            main = np.log1p(-weight) - 0.5 * (b[0] ** 2 + b[1] ** 2)
            side = (
                np.log(weight)
                - 2 * np.log(width)
                - ((b[0] - distance) ** 2 + b[1] ** 2) / (2 * width**2)
            )
            pm.Potential("two_modes", pm.math.logaddexp(main, side))
        return model

    means, quantiles = _grid_reference(log_density, np.linspace(-7.0, 8.0, 3001))
    return Reference(
        "two-modes", "check_new", build, "b", means, quantiles, lambda b: b[:, 0] > distance / 2
    )


def u_beta_reference(alpha: float = 0.4) -> Reference:
    """Independent ``Beta(0.4, 0.4)``, U-shaped: sampled in log-odds, heavy tails on both sides."""

    def build():
        with pm.Model() as model:
            pm.Beta("p", alpha, alpha, shape=2)
        return model

    posterior = stats.beta(alpha, alpha)
    quantiles = np.array([[posterior.ppf(q)] * 2 for q in QUANTILES])
    return Reference(
        "u-beta",
        "check_new",
        build,
        "p",
        np.full(2, 0.5),
        quantiles,
        lambda p: np.any((p < 0.01) | (p > 0.99), axis=1),
    )


REFERENCES = {
    "banana": lambda: banana_reference("banana", "tune", 1, 100, 2.0),
    "banana-2015": lambda: banana_reference("banana-2015", "tune", 2015, 100, 2.0),
    "sharp-banana": lambda: banana_reference("sharp-banana", "check", 7, 50, 1.0),
    "log-gamma": log_gamma_reference,
    "student-t": student_t_reference,
    "funnel": funnel_reference,
    "funnel-neal": lambda: funnel_reference("funnel-neal", 3.0),
    "two-modes": two_modes_reference,
    "u-beta": u_beta_reference,
    "ring": ring_reference,
}


def _ess(draws: np.ndarray, method: str) -> float:
    dataset = xr.Dataset({"x": (("chain", "draw"), draws)})
    return float(az.ess(dataset, method=method)["x"])


def _z_mean(draws: np.ndarray, mean: float) -> float:
    return (draws.mean() - mean) / (draws.std() / np.sqrt(_ess(draws, "bulk")))


def _z_quantile(draws: np.ndarray, quantile: float, value: float) -> float:
    """The error of the share of draws below ``value`` (which is ``quantile``), in its MCSE."""
    below = (draws <= value).astype(float)
    ess = _ess(below, "mean") if 0 < below.mean() < 1 else draws.size
    return (below.mean() - quantile) / np.sqrt(quantile * (1 - quantile) / ess)


SAMPLERS = {
    "RNSHMC": RNSHMC,
    "ARNSHMC": ARNSHMC,
    "SparseGridHMC": SparseGridHMC,
    "RNSRMHMC": RNSRMHMC,
    "NUTS": pm.NUTS,
}
WITH_DYNAMICS = ("RNSHMC", "ARNSHMC")
"""Samplers that take ``dynamics=``; the others run their own (``"own"`` in the table).
``NUTS`` is PyMC's, the control: how far its exact draws stray by the same measures."""


def _share(stats_group, name: str, where=None) -> float:
    """The mean of a stat (of ``stats == where`` if given), NaN where the sampler has none."""
    if name not in stats_group:
        return float("nan")
    values = np.asarray(stats_group[name].values)
    return float(np.mean(values if where is None else values == where))


def _highest_wall(stats_group) -> float:
    """The highest wall a safety-net draw crossed (``-surrogate_error`` of the net's draws)."""
    if "safety_net" not in stats_group or "surrogate_error" not in stats_group:
        return float("nan")
    net = np.asarray(stats_group["safety_net"].values)
    errors = np.asarray(stats_group["surrogate_error"].values)[net]
    errors = errors[np.isfinite(errors)]
    return float(-errors.min()) if errors.size else float("nan")


def surrogate_options(args) -> dict:
    """``surrogate=`` for ``--ceiling`` (the network's ceiling on), ``coarse=`` for ``--coarse
    wrong`` (a deliberately wrong coarse model, ``N(0.5, 1.5^2)`` in every coordinate),
    ``surrogate_target_accept=`` for ``--surrogate-target-accept``."""
    options = {"surrogate": RandomNetworkSurrogate(ceiling=True)} if args.ceiling else {}
    if args.coarse == "wrong":
        options["coarse"] = WrongCoarseModel()
    if args.surrogate_target_accept is not None:
        options["surrogate_target_accept"] = args.surrogate_target_accept
    return options


def run(reference: Reference, dynamics: str, seed: int, args) -> dict:
    sampler = SAMPLERS[args.sampler]
    options = {"dynamics": dynamics} if args.sampler in WITH_DYNAMICS else {}
    model = reference.build()
    start = time.perf_counter()
    with model, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SurrogateWarning)
        idata = pm.sample(
            step=sampler(**options, **surrogate_options(args)),
            tune=args.tune,
            draws=args.draws,
            chains=args.chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    seconds = time.perf_counter() - start
    told = [str(w.message) for w in caught if issubclass(w.category, SurrogateWarning)]
    draws = np.asarray(idata.posterior[reference.variable].values)
    draws = draws.reshape(draws.shape[0], draws.shape[1], -1)
    dim = draws.shape[-1]
    z_means = [_z_mean(draws[..., i], reference.means[i]) for i in range(dim)]
    z_quantiles = [
        _z_quantile(draws[..., i], q, reference.quantiles[k, i])
        for k, q in enumerate(QUANTILES)
        for i in range(dim)
    ]
    rhat = az.rhat(xr.Dataset({"x": (("chain", "draw", "dim"), draws)}))["x"].values
    bulk = min(_ess(draws[..., i], "bulk") for i in range(dim))
    tail = min(_ess(draws[..., i], "tail") for i in range(dim))
    stats_group = idata.sample_stats
    divergences = int(np.asarray(stats_group["diverging"].values).sum())
    flagged = bool(np.max(rhat) > 1.01 or bulk < 100 * args.chains or divergences > 0 or told)
    worst_mean = float(np.max(np.abs(z_means)))
    return {
        "posterior": reference.name,
        "split": reference.split,
        "sampler": args.sampler,
        "dynamics": dynamics if args.sampler in WITH_DYNAMICS else "own",
        "seed": seed,
        "max |z| mean": worst_mean,
        "max |z| quantile": float(np.max(np.abs(z_quantiles))),
        "min bulk ESS": bulk,
        "min tail ESS": tail,
        "max R-hat": float(np.max(rhat)),
        "divergences": divergences,
        "tail share": float(np.mean(reference.tail_region(draws.reshape(-1, dim)))),
        "net share": _share(stats_group, "safety_net"),
        "exact NUTS share": _share(stats_group, "phase", where=3),
        "max wall": _highest_wall(stats_group),
        "warnings": len(told),
        "flagged": flagged,
        "wrong": worst_mean > WRONG,
        "confident wrong": worst_mean > WRONG and not flagged,
        "seconds": seconds,
        "told": told[:2],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posteriors", default=",".join(REFERENCES))
    parser.add_argument("--sampler", choices=list(SAMPLERS), default="RNSHMC")
    parser.add_argument("--dynamics", default="hmc,nuts")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--output", default="trust_battery")
    parser.add_argument("--ceiling", action="store_true", help="the network's ceiling on")
    parser.add_argument("--coarse", choices=["none", "wrong"], default="none")
    parser.add_argument(
        "--surrogate-target-accept", type=float, default=None, help="the sampler's own default"
    )
    args = parser.parse_args()
    rows = []
    columns = (
        "posterior",
        "split",
        "sampler",
        "dynamics",
        "seed",
        "max |z| mean",
        "max |z| quantile",
        "min bulk ESS",
        "min tail ESS",
        "max R-hat",
        "divergences",
        "tail share",
        "net share",
        "exact NUTS share",
        "max wall",
        "warnings",
        "flagged",
        "wrong",
        "confident wrong",
        "seconds",
    )
    for name in args.posteriors.split(","):
        reference = REFERENCES[name]()
        all_dynamics = args.dynamics.split(",") if args.sampler in WITH_DYNAMICS else ["own"]
        for dynamics in all_dynamics:
            for seed in (int(s) for s in args.seeds.split(",")):
                row = run(reference, dynamics, seed, args)
                rows.append(row)
                print(" | ".join(cell(row[c]) for c in columns), flush=True)
                write_results(
                    args.output,
                    {"metadata": run_metadata(**vars(args)), "runs": rows},
                    _markdown(rows, columns),
                )


def _markdown(rows: list[dict], columns: tuple[str, ...]) -> str:
    lines = markdown_table(rows, columns)
    wrong = sum(row["wrong"] for row in rows)
    confident = sum(row["confident wrong"] for row in rows)
    summary = (
        f"\n{len(rows)} runs; {wrong} wrong (a mean > {WRONG} MCSE off), "
        f"{confident} of them unflagged.\n"
    )
    return "\n".join(lines) + "\n" + summary


if __name__ == "__main__":
    main()
