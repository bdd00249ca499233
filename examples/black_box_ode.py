"""Sample a model whose likelihood is a black box: a scipy ODE solve inside an Op with no gradient.

    python examples/black_box_ode.py                                 # 2 chains, tune 1000
    python examples/black_box_ode.py --tune 300 --draws 200 --chains 1   # smoke

NUTS cannot run on such a model (nutpie refuses it too); PyMC's ODE tutorials fall back to
``DEMetropolisZ``. ``RNSHMC`` notices that the logp has no gradient, explores with a random walk,
fits its surrogate to log-density values, and then draws with surrogate Hamiltonian dynamics at
one ODE solve per draw, accepted with the exact density. The script samples Lotka-Volterra
predator-prey dynamics (four rates and a noise scale, data simulated here) with both and prints
the whole call's time, ESS, ODE solves per draw, and how far the two samplers' means are apart.

Copy the ``Op`` below for your own simulator: ``make_node`` declares the inputs and outputs,
``perform`` runs the simulator with numpy, and no ``grad``/``pullback`` is defined.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import solve_ivp

from pymc_rnshmc import RNSHMC

TIMES = np.linspace(0.5, 15.0, 30)
START = np.array([10.0, 5.0])  # prey and predators at t = 0, known
TRUTH = {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075, "sigma": 0.1}


def populations(rates: np.ndarray) -> np.ndarray:
    """Prey and predators at ``TIMES`` for rates ``(alpha, beta, gamma, delta)``; NaN if failed."""
    alpha, beta, gamma, delta = rates

    def change(t, y):
        prey, predators = y
        return [
            alpha * prey - beta * prey * predators,
            delta * prey * predators - gamma * predators,
        ]

    solution = solve_ivp(change, (0.0, TIMES[-1]), START, t_eval=TIMES, rtol=1e-6, atol=1e-8)
    if not solution.success:
        return np.full((TIMES.size, 2), np.nan)
    return solution.y.T


class LotkaVolterra(Op):
    """rates (4,) -> populations (30, 2), solved by scipy; deliberately without a gradient."""

    __props__ = ()

    def make_node(self, rates):
        rates = pt.as_tensor_variable(rates).astype("float64")
        return Apply(self, [rates], [pt.dmatrix()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = populations(inputs[0])


def model(seed: int = 1) -> pm.Model:
    rng = np.random.default_rng(seed)
    rates = np.array([TRUTH[name] for name in ("alpha", "beta", "gamma", "delta")])
    observed = populations(rates) * np.exp(TRUTH["sigma"] * rng.normal(size=(TIMES.size, 2)))
    with pm.Model() as lotka_volterra:
        alpha = pm.LogNormal("alpha", 0.0, 0.5)
        beta = pm.LogNormal("beta", np.log(0.1), 0.5)
        gamma = pm.LogNormal("gamma", np.log(1.5), 0.5)
        delta = pm.LogNormal("delta", np.log(0.075), 0.5)
        sigma = pm.HalfNormal("sigma", 0.5)
        solved = LotkaVolterra()(pt.stack([alpha, beta, gamma, delta]))
        pm.LogNormal("observed", pt.log(solved), sigma, observed=observed)
    return lotka_volterra


def run(step_factory, args) -> tuple[dict, object]:
    with model(args.seed):
        start = time.perf_counter()
        idata = pm.sample(
            step=step_factory(),
            tune=args.tune,
            draws=args.draws,
            chains=args.chains,
            cores=1,
            random_seed=args.seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        wall = time.perf_counter() - start
    posterior = xr.Dataset({name: idata.posterior[name] for name in TRUTH})
    bulk = min(float(az.ess(posterior, method="bulk")[name]) for name in TRUTH)
    tail = min(float(az.ess(posterior, method="tail")[name]) for name in TRUTH)
    stats = idata.sample_stats
    # DEMetropolisZ solves the ODE at both ends of every proposal (PyMC's delta_logp)
    solves = float(stats["n_logp_evals"].mean()) if "n_logp_evals" in stats else 2.0
    row = {"wall s": wall, "min bulk ESS": bulk, "min tail ESS": tail}
    row |= {"bulk ESS/s": bulk / wall, "ODE solves/draw": solves}
    return row, idata


def mean_gap_in_mcse(first, second) -> float:
    """Largest difference of the two runs' posterior means, in their combined MCSE."""
    gaps = []
    for name in TRUTH:
        a, b = (xr.Dataset({name: run.posterior[name]}) for run in (first, second))
        mcse = np.hypot(float(az.mcse(a)[name]), float(az.mcse(b)[name]))
        gaps.append(abs(float(a[name].mean()) - float(b[name].mean())) / mcse)
    return max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Numba will use object mode")
    rows = {}
    rows["DEMetropolisZ"], baseline = run(pm.DEMetropolisZ, args)
    rows["RNSHMC"], surrogate = run(RNSHMC, args)
    columns = list(rows["RNSHMC"])
    print("| sampler | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{row[column]:.4g}" for column in columns) + " |")
    speedup = rows["RNSHMC"]["bulk ESS/s"] / rows["DEMetropolisZ"]["bulk ESS/s"]
    print(f"RNSHMC / DEMetropolisZ bulk ESS per second of the whole call: {speedup:.1f}x")
    print(
        f"largest gap between the samplers' means: {mean_gap_in_mcse(baseline, surrogate):.1f} MCSE"
    )


if __name__ == "__main__":
    main()
