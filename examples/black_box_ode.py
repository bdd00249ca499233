"""Sample a model whose likelihood is a black box: a scipy ODE solve inside an Op with no gradient.

    python examples/black_box_ode.py                                 # 2 chains, tune 1000
    python examples/black_box_ode.py --tune 300 --draws 200 --chains 1   # smoke

NUTS cannot run on such a model (nutpie refuses it too); PyMC's ODE tutorials fall back to
``DEMetropolisZ``. ``RNSHMC`` notices that the logp has no gradient, explores with a random walk,
fits its surrogate to log-density values, and then draws with surrogate Hamiltonian dynamics at
one ODE solve per draw, accepted with the exact density. The script samples Lotka-Volterra
predator-prey dynamics (four rates and a noise scale, data simulated here) with both through
:func:`pymc_rnshmc.compare_samplers` (whole call, ESS, ODE solves per draw after tuning, how far
the two samplers' means are apart; NUTS and nutpie are skipped: the model has no gradient).

Copy the ``Op`` below for your own simulator: ``make_node`` declares the inputs and outputs,
``perform`` runs the simulator with numpy, and no ``grad``/``pullback`` is defined.

A solve takes milliseconds near the posterior, but at rates far outside it the system explodes
and an adaptive solver can grind for many minutes. ``RNSHMC(time_limit=TIME_LIMIT)`` abandons
a solve that runs past the limit and counts it as a rejection (stat ``model_failures``): the
sampler then targets the posterior truncated to where the solve finishes in time, which here
leaves out only points with no posterior mass.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import solve_ivp

from pymc_rnshmc import RNSHMC, compare_samplers

TIMES = np.linspace(0.5, 15.0, 30)
START = np.array([10.0, 5.0])  # prey and predators at t = 0, known
TRUTH = {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075, "sigma": 0.1}
TIME_LIMIT = 2.0
"""Seconds a solve may take: hundreds of times a solve near the posterior."""


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Numba will use object mode")
    comparison = compare_samplers(
        model(args.seed),
        samplers={
            "DEMetropolisZ": pm.DEMetropolisZ,
            "RNSHMC": lambda: RNSHMC(time_limit=TIME_LIMIT),
        },
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
        reference="DEMetropolisZ",
    )
    print(comparison)
    print(
        "(DEMetropolisZ keeps no evaluation counts: it solves the ODE at both ends of every "
        "proposal, PyMC's delta_logp.)"
    )
    table = comparison.table
    ess_per_second = table["bulk ESS/s (call)"]
    speedup = ess_per_second["RNSHMC"] / ess_per_second["DEMetropolisZ"]
    print(f"\nRNSHMC / DEMetropolisZ bulk ESS per second of the whole call: {speedup:.1f}x")
    gap = table.loc["RNSHMC", "max |dmean| (MCSE)"]
    print(f"largest gap between the samplers' means: {gap:.1f} MCSE")
    failures = int(comparison.runs["RNSHMC"].trace.sample_stats["model_failures"].sum())
    print(f"RNSHMC's failed or abandoned solves after tuning (model_failures): {failures}")


if __name__ == "__main__":
    main()
