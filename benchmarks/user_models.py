"""Models a PyMC user writes, none of them tuned on: does RNSHMC run, agree and keep up?

    python -m benchmarks.user_models                                  # 12 models, 4 seeds
    python -m benchmarks.user_models --models lkj_mvn --seeds 1       # one model, one seed
    python -m benchmarks.user_models --write-references \
        tests/step_methods/data/user_models_reference.json             # the slow test's

The posteriors the package's rules were written and checked on are the papers' workloads, the
posteriordb references and a few curved or heavy-tailed densities. The models here are the
everyday ones instead, written as a PyMC user writes them, with the distributions, transforms
and model pieces those sets lack: an LKJ Cholesky covariance, a zero-inflated count regression,
a Gaussian random walk (stochastic volatility, 101 parameters), censored and truncated
likelihoods, a Student-t regression with ``pm.Data`` and a ``Deterministic``, a normal mixture
with ordered means and Dirichlet weights, a non-centred multilevel regression, a latent Poisson
Gaussian process (42 parameters), a ``Potential``, and a change-point model whose integer
switch point PyMC gives to its ``Metropolis`` beside the surrogate step; and one costly model,
a Gaussian process's hyperparameters by its marginal likelihood on 200 points (about 2 ms a
logp and gradient), of the kind the package is for. None of them was used to choose anything in
the package: they are all held out.

Per model, a reference first: nutpie, 4 chains of 1000 + 5000 draws (PyMC's NUTS beside its
Metropolis where the model has a discrete variable, which nutpie does not take). Then, per seed,
``RNSHMC()`` with its defaults, PyMC's NUTS (``nuts_sampler="pymc"``) and nutpie (PyMC 6's
default; not on the discrete model), all with their defaults, 2 chains of 1000 + 1000 draws on
one core, each call timed whole after an untimed call of 10 + 10 draws of each has compiled the
model's functions. Per run: the whole call, min bulk and tail ESS over
the continuous variables, min ESS per second, the largest ``|z|`` of a posterior mean against
the reference (each mean's MCSE and the reference's added in quadrature, all variables), the
largest R-hat, and every warning the package raised. A run is **wrong** when a mean is more
than ``WRONG`` MCSE off. Results go to ``benchmarks/results/<output>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm

from benchmarks.measure import cell, markdown_table, run_metadata, write_results
from pymc_rnshmc import RNSHMC, SurrogateWarning
from pymc_rnshmc.comparison.table import coordinate_ess

WRONG = 5.0
"""``|z|`` of a mean above which a run is wrong (the trust battery's bar)."""
REFERENCE_DRAWS, REFERENCE_CHAINS = 5000, 4


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def lkj_mvn() -> pm.Model:
    """Three correlated normals: means and an LKJ Cholesky covariance (9 parameters)."""
    scales = np.array([1.0, 2.0, 0.5])
    correlation = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.5], [0.3, 0.5, 1.0]])
    y = _rng(1).multivariate_normal([1.0, -1.0, 0.0], correlation * np.outer(scales, scales), 200)
    with pm.Model() as model:
        chol, _, _ = pm.LKJCholeskyCov(
            "chol", n=3, eta=2.0, sd_dist=pm.Exponential.dist(1.0, shape=3), compute_corr=True
        )
        mu = pm.Normal("mu", 0.0, 5.0, shape=3)
        pm.MvNormal("y", mu, chol=chol, observed=y)
    return model


def zip_regression() -> pm.Model:
    """A zero-inflated Poisson regression (3 parameters, 300 counts)."""
    rng = _rng(2)
    x = rng.normal(size=300)
    counts = np.where(rng.random(300) < 0.3, 0, rng.poisson(np.exp(0.5 + 0.8 * x)))
    with pm.Model() as model:
        intercept, slope = pm.Normal("a", 0.0, 2.0), pm.Normal("b", 0.0, 2.0)
        psi = pm.Beta("psi", 2.0, 2.0)
        pm.ZeroInflatedPoisson("y", psi=psi, mu=pm.math.exp(intercept + slope * x), observed=counts)
    return model


def stochastic_volatility() -> pm.Model:
    """Log-volatility as a Gaussian random walk of 100 steps, and its scale (101 parameters)."""
    rng = _rng(3)
    y = rng.normal(0.0, np.exp(np.cumsum(rng.normal(0.0, 0.2, 100)) / 2))
    with pm.Model() as model:
        scale = pm.Exponential("s", 10.0)
        h = pm.GaussianRandomWalk("h", sigma=scale, init_dist=pm.Normal.dist(0.0, 1.0), shape=100)
        pm.Normal("y", 0.0, pm.math.exp(h / 2), observed=y)
    return model


def censored_regression() -> pm.Model:
    """A linear regression whose responses are censored to [-1, 3] (3 parameters)."""
    rng = _rng(4)
    x = rng.normal(size=150)
    y = np.clip(1.0 + 2.0 * x + rng.normal(0.0, 1.0, 150), -1.0, 3.0)
    with pm.Model() as model:
        intercept, slope = pm.Normal("a", 0.0, 5.0), pm.Normal("b", 0.0, 5.0)
        sigma = pm.HalfNormal("s", 2.0)
        line = pm.Normal.dist(intercept + slope * x, sigma)
        pm.Censored("y", line, lower=-1.0, upper=3.0, observed=y)
    return model


def robust_regression() -> pm.Model:
    """Student-t regression with unknown degrees of freedom, ``pm.Data`` and dims (4)."""
    rng = _rng(5)
    x = rng.normal(size=100)
    y = 0.5 - x + 0.5 * rng.standard_t(3.0, 100)
    with pm.Model(coords={"obs": range(100)}) as model:
        predictor = pm.Data("x", x, dims="obs")
        intercept, slope = pm.Normal("a", 0.0, 5.0), pm.Normal("b", 0.0, 5.0)
        sigma, nu = pm.HalfCauchy("s", 1.0), pm.Gamma("nu", 2.0, 0.1)
        mu = pm.Deterministic("mu", intercept + slope * predictor, dims="obs")
        pm.StudentT("y", nu=nu, mu=mu, sigma=sigma, observed=y, dims="obs")
    return model


def normal_mixture() -> pm.Model:
    """Two normals with ordered means and Dirichlet weights (5 parameters, 250 points)."""
    rng = _rng(6)
    y = np.concatenate([rng.normal(-2.0, 1.0, 150), rng.normal(2.0, 0.7, 100)])
    with pm.Model() as model:
        weights = pm.Dirichlet("w", np.ones(2))
        means = pm.Normal(
            "mu", 0.0, 5.0, shape=2, transform=pm.distributions.transforms.ordered, initval=[-1, 1]
        )
        sigmas = pm.HalfNormal("s", 2.0, shape=2)
        pm.NormalMixture("y", w=weights, mu=means, sigma=sigmas, observed=y)
    return model


def truncated_normal() -> pm.Model:
    """A normal's mean and scale from draws truncated below at zero (2 parameters)."""
    y = _rng(7).normal(1.0, 2.0, 500)
    y = y[y > 0][:200]
    with pm.Model() as model:
        mu, sigma = pm.Normal("mu", 0.0, 5.0), pm.HalfNormal("s", 5.0)
        pm.Truncated("y", pm.Normal.dist(mu, sigma), lower=0.0, observed=y)
    return model


def multilevel_regression() -> pm.Model:
    """Non-centred varying intercepts for 30 groups, a slope and a noise scale (34)."""
    rng = _rng(8)
    group, x = rng.integers(0, 30, 400), rng.integers(0, 2, 400)
    y = rng.normal(1.5, 0.4, 30)[group] - 0.6 * x + rng.normal(0.0, 0.7, 400)
    with pm.Model(coords={"group": range(30)}) as model:
        mu_a, sigma_a = pm.Normal("mu_a", 0.0, 5.0), pm.HalfNormal("s_a", 1.0)
        z = pm.Normal("z", 0.0, 1.0, dims="group")
        intercepts = pm.Deterministic("a", mu_a + sigma_a * z, dims="group")
        slope, sigma = pm.Normal("b", 0.0, 2.0), pm.HalfNormal("s", 1.0)
        pm.Normal("y", intercepts[group] + slope * x, sigma, observed=y)
    return model


def latent_gp() -> pm.Model:
    """A latent Gaussian process under Poisson counts, ``pm.gp.Latent`` (42 parameters)."""
    inputs = np.linspace(0.0, 10.0, 40)[:, None]
    counts = _rng(9).poisson(np.exp(np.sin(inputs[:, 0])))
    with pm.Model() as model:
        length, amplitude = pm.InverseGamma("ell", 5.0, 5.0), pm.HalfNormal("eta", 1.0)
        gp = pm.gp.Latent(cov_func=amplitude**2 * pm.gp.cov.ExpQuad(1, length))
        f = gp.prior("f", X=inputs)
        pm.Poisson("y", pm.math.exp(f), observed=counts)
    return model


def potential_model() -> pm.Model:
    """A normal's mean and scale with a soft constraint as a ``Potential`` (2 parameters)."""
    y = _rng(10).normal(1.0, 1.0, 50)
    with pm.Model() as model:
        mu, sigma = pm.Normal("mu", 0.0, 10.0), pm.HalfNormal("s", 2.0)
        pm.Potential("soft_constraint", -0.5 * ((mu - sigma) / 0.5) ** 2)
        pm.Normal("y", mu, sigma, observed=y)
        pm.Deterministic("ratio", mu / sigma)
    return model


def marginal_gp() -> pm.Model:
    """A Matern 5/2 GP's hyperparameters by its marginal likelihood on 200 points (3).

    The costly one: the likelihood's Cholesky factor and its gradient take about 2 ms.
    """
    rng = _rng(11)
    inputs = np.sort(rng.uniform(0.0, 10.0, 200))[:, None]
    y = np.sin(inputs[:, 0]) + 0.3 * np.cos(3.0 * inputs[:, 0]) + rng.normal(0.0, 0.3, 200)
    with pm.Model() as model:
        length, amplitude = pm.Gamma("ell", 2.0, 1.0), pm.HalfNormal("eta", 2.0)
        gp = pm.gp.Marginal(cov_func=amplitude**2 * pm.gp.cov.Matern52(1, length))
        gp.marginal_likelihood("y", X=inputs, y=y, sigma=pm.HalfNormal("sigma", 1.0))
    return model


COAL_DISASTERS = np.array(
    [4, 5, 4, 1, 0, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4,
     2, 5, 2, 2, 3, 4, 2, 1, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0, 1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2,
     0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 2, 1, 0, 0, 0, 1, 1, 0, 2, 3, 3, 1, 1, 2, 1, 1, 1, 1, 2,
     4, 2, 0, 0, 1, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1]
)  # fmt: skip
"""British coal-mining disasters a year, 1851-1961 (Jarrett 1979)."""


def coal_changepoint() -> pm.Model:
    """Two Poisson rates and an integer switch year, which PyMC samples with Metropolis."""
    years = np.arange(1851, 1851 + len(COAL_DISASTERS))
    with pm.Model() as model:
        switch = pm.DiscreteUniform("switchpoint", lower=years.min(), upper=years.max())
        early, late = pm.Exponential("early_rate", 1.0), pm.Exponential("late_rate", 1.0)
        pm.Poisson(
            "disasters", pm.math.switch(switch >= years, early, late), observed=COAL_DISASTERS
        )
    return model


MODELS = {
    build.__name__: build
    for build in (
        lkj_mvn,
        zip_regression,
        stochastic_volatility,
        censored_regression,
        robust_regression,
        normal_mixture,
        truncated_normal,
        multilevel_regression,
        latent_gp,
        potential_model,
        coal_changepoint,
        marginal_gp,
    )
}


def _posterior(idata):
    """The posterior as an ``xarray.Dataset`` (from ``InferenceData`` or a ``DataTree``)."""
    posterior = idata.posterior if hasattr(idata, "posterior") else idata["posterior"]
    return posterior.to_dataset() if hasattr(posterior, "to_dataset") else posterior


def _continuous(model: pm.Model) -> list[str]:
    """The free variables NUTS and the surrogate step sample (not the integer ones)."""
    return [v.name for v in model.free_RVs if not v.dtype.startswith("int")]


def _discrete(model: pm.Model) -> bool:
    return len(_continuous(model)) < len(model.free_RVs)


def sample_model(model: pm.Model, sampler: str, seed: int, tune: int, draws: int, chains: int):
    """``pm.sample`` of ``model`` with ``sampler``, one core.

    ``"RNSHMC"`` (its defaults), ``"NUTS"`` (PyMC's), anything else nutpie (PyMC's NUTS where
    the model has a discrete variable, which nutpie does not take).
    """
    options = {
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "cores": 1,
        "random_seed": seed,
        "progressbar": False,
        "compute_convergence_checks": False,
    }
    with model:
        if sampler == "RNSHMC":
            return pm.sample(step=RNSHMC(), **options)
        nuts = "pymc" if sampler == "NUTS" or _discrete(model) else "nutpie"
        return pm.sample(nuts_sampler=nuts, **options)


def _runs(sampler: str, model: pm.Model) -> bool:
    """nutpie takes no discrete variables (PyMC's NUTS beside Metropolis is the baseline)."""
    return sampler != "nutpie" or not _discrete(model)


def moments(model: pm.Model, idata) -> dict:
    """Each free variable's posterior means and their MCSEs, flattened."""
    posterior = _posterior(idata)
    found = {}
    for variable in model.free_RVs:
        draws = posterior[variable.name].astype(float).to_dataset()
        found[variable.name] = {
            "mean": np.ravel(draws[variable.name].mean(("chain", "draw")).values),
            "mcse": np.ravel(az.mcse(draws)[variable.name].values),
        }
    return found


def _continuous_ess(model: pm.Model, idata, method: str) -> float:
    """The least ESS of a continuous coordinate (0 for chains that never moved)."""
    posterior = _posterior(idata)
    draws = [np.asarray(posterior[name].values, dtype=float) for name in _continuous(model)]
    flat = np.concatenate([d.reshape(d.shape[0], d.shape[1], -1) for d in draws], axis=2)
    return float(np.min(coordinate_ess(flat, method)))


def _largest_z(found: dict, reference: dict) -> tuple[float, str]:
    largest = (0.0, "")
    for name, ours in found.items():
        theirs = reference[name]
        z = (ours["mean"] - theirs["mean"]) / np.hypot(ours["mcse"], theirs["mcse"])
        largest = max(largest, (float(np.max(np.abs(z))), name))
    return largest


def run(name: str, model: pm.Model, sampler: str, seed: int, reference: dict, args) -> dict:
    """One timed call, and what it got right."""
    row = dict.fromkeys(COLUMNS, np.nan) | {"model": name, "sampler": sampler, "seed": seed}
    row.update({"worst variable": "", "wrong": False, "error": ""})
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            idata = sample_model(model, sampler, seed, args.tune, args.draws, args.chains)
        except Exception as error:  # a failing run is a result here
            idata, row["error"] = None, f"{type(error).__name__}: {error}"[:300]
    row["call s"] = time.perf_counter() - started
    row["warnings"] = sorted(
        {
            str(w.message)[:200]
            for w in caught
            if issubclass(w.category, SurrogateWarning) or "pymc_rnshmc" in str(w.filename)
        }
    )
    if idata is None:
        return row
    bulk, tail = _continuous_ess(model, idata, "bulk"), _continuous_ess(model, idata, "tail")
    z, worst = _largest_z(moments(model, idata), reference)
    rhat = az.rhat(_posterior(idata)[[v.name for v in model.free_RVs]])
    row.update(
        {
            "min bulk ESS": bulk,
            "min tail ESS": tail,
            "min ESS/s": min(bulk, tail) / row["call s"],
            "max |z| mean": z,
            "worst variable": worst,
            "max R-hat": float(max(np.max(rhat[v].values) for v in rhat.data_vars)),
            "wrong": z > WRONG,
        }
    )
    return row


def _reference(name: str, model: pm.Model) -> dict:
    idata = sample_model(model, "reference", 2026, 1000, REFERENCE_DRAWS, REFERENCE_CHAINS)
    return moments(model, idata)


def _compile(model: pm.Model) -> None:
    """An untimed short call of each sampler, so that the timed calls find the model compiled."""
    for sampler in ("NUTS", "RNSHMC", "nutpie"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sample_model(model, sampler, 0, 10, 10, 1)


COLUMNS = (
    "model",
    "sampler",
    "seed",
    "call s",
    "min bulk ESS",
    "min tail ESS",
    "min ESS/s",
    "max |z| mean",
    "worst variable",
    "max R-hat",
    "wrong",
    "warnings",
    "error",
)


BASELINES = ("NUTS", "nutpie")


def _ratios(rows: list[dict], baseline: str) -> list[tuple[str, int, float]]:
    """RNSHMC's min ESS per second over ``baseline``'s (or the stronger of both), per run."""
    measured = {(r["model"], r["seed"], r["sampler"]): r["min ESS/s"] for r in rows}
    found = []
    for row in rows:
        if row["sampler"] != "RNSHMC" or row["error"]:
            continue
        names = BASELINES if baseline == "strongest" else (baseline,)
        theirs = [measured.get((row["model"], row["seed"], name), np.nan) for name in names]
        if np.any(np.isfinite(theirs)):
            found.append((row["model"], row["seed"], row["min ESS/s"] / np.nanmax(theirs)))
    return found


def _markdown(rows: list[dict]) -> str:
    lines = markdown_table(rows, COLUMNS)
    for baseline in (*BASELINES, "strongest"):
        ratios = _ratios(rows, baseline)
        if not ratios:
            continue
        lines += ["", f"RNSHMC's min ESS per second over {baseline}'s (seeds in order):", ""]
        for name in dict.fromkeys(model for model, _, _ in ratios):
            values = [ratio for model, _, ratio in ratios if model == name]
            lines.append(f"- {name}: " + ", ".join(f"{v:.2f}" for v in values))
        every = np.array([ratio for _, _, ratio in ratios])
        lines.append(
            f"\nGeometric mean over {len(every)} runs: {np.exp(np.mean(np.log(every))):.2f}; "
            f"{np.sum(every < 0.9)} below 0.9."
        )
    lines.append(
        f"\n{sum(r['wrong'] for r in rows if r['sampler'] == 'RNSHMC')} RNSHMC runs wrong, "
        f"{sum(bool(r['error']) for r in rows)} failed."
    )
    return "\n".join(lines) + "\n"


def write_references(path: str, names: list[str]) -> None:
    """The reference means and MCSEs of the models ``names``, as the slow test reads them.

    Added to the file's other models, if it exists.
    """
    stored = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    for name in names:
        model = MODELS[name]()
        stored[name] = {
            variable: {key: values.tolist() for key, values in found.items()}
            for variable, found in _reference(name, model).items()
        }
        print(name, flush=True)
    with open(path, "w") as file:
        json.dump(stored, file, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--samplers", default="RNSHMC,NUTS,nutpie")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--output", default="user_models")
    parser.add_argument("--write-references", help="store the references here (JSON), no runs")
    args = parser.parse_args()
    if args.write_references:
        write_references(args.write_references, args.models.split(","))
        return
    rows = []
    for name in args.models.split(","):
        model = MODELS[name]()
        reference = _reference(name, model)
        _compile(model)
        for seed in (int(s) for s in args.seeds.split(",")):
            for sampler in args.samplers.split(","):
                if not _runs(sampler, model):
                    continue
                row = run(name, model, sampler, seed, reference, args)
                rows.append(row)
                print(" | ".join(cell(row.get(c, "")) for c in COLUMNS), flush=True)
                write_results(
                    args.output,
                    {"metadata": run_metadata(**vars(args)), "runs": rows},
                    _markdown(rows),
                )


if __name__ == "__main__":
    main()
