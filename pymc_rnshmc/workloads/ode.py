"""ODE workloads through ``pm.ode``: Lotka-Volterra predator-prey dynamics.

:func:`lotka_volterra` fits seven parameters to simulated data; :func:`hudson_lynx_hare` fits
eight to the Hudson's Bay Company's lynx and hare pelts of 1900-1920, as posteriordb's
``hudson_lynx_hare-lotka_volterra`` does (Carpenter's Stan case study).

``pm.ode.DifferentialEquation`` integrates the system and its forward sensitivities with scipy
for every logp-and-gradient call, the slow path PyMC users meet with ODE models: here one call
takes milliseconds, and NUTS pays several of them per draw.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.ode import DifferentialEquation
from scipy.integrate import odeint, solve_ivp

__all__ = [
    "HUDSON_PELTS",
    "LOTKA_VOLTERRA_TRUTH",
    "hudson_lynx_hare",
    "lotka_volterra",
    "lotka_volterra_data",
]

LOTKA_VOLTERRA_TRUTH = {
    "alpha": 0.55,
    "beta": 0.028,
    "gamma": 0.84,
    "delta": 0.026,
    "prey0": 34.0,
    "predator0": 5.9,
    "sigma": 0.25,
}
"""Parameters the data are simulated with (near the classic fits of the Hudson Bay furs)."""


def _rates(y, t, p):
    """``d(prey, predator)/dt`` with ``p = (alpha, beta, gamma, delta)``, as ``pm.ode`` calls it."""
    prey, predator = y[0], y[1]
    return [p[0] * prey - p[1] * prey * predator, p[3] * prey * predator - p[2] * predator]


def lotka_volterra_data(
    n_times: int = 20, seed: int = 2026
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observation times, noisy observations ``(n_times, 2)`` and the noise-free solution.

    The observations are the solution times log-normal noise of scale ``sigma``.
    """
    truth = LOTKA_VOLTERRA_TRUTH
    times = np.linspace(1.0, 20.0, n_times)
    rates = (truth["alpha"], truth["beta"], truth["gamma"], truth["delta"])
    solution = solve_ivp(
        lambda t, y: _rates(y, t, rates),
        (0.0, times[-1]),
        [truth["prey0"], truth["predator0"]],
        t_eval=times,
        rtol=1e-10,
        atol=1e-10,
    ).y.T
    rng = np.random.default_rng(seed)
    observed = solution * np.exp(truth["sigma"] * rng.normal(size=solution.shape))
    return times, observed, solution


def lotka_volterra(
    n_times: int = 20,
    seed: int = 2026,
    steps_per_unit: int | None = None,
    rtol: float | None = None,
) -> pm.Model:
    """The Lotka-Volterra model on simulated data, seven parameters, through ``pm.ode``.

    Log-normal priors on the four rates and the two initial populations (centred near the truth,
    a factor of about 1.6 wide), a half-normal noise scale, log-normal observation noise.

    ``steps_per_unit`` gives its coarse version instead: the same model solved by the classical
    fourth-order Runge-Kutta method with this many fixed steps per unit of time, written in
    PyTensor (its gradient by automatic differentiation, no sensitivity equations), for
    ``RNSHMC(coarse=...)``. Needs whole-number observation times (``n_times=20``).

    ``rtol`` gives another coarse version: ``pm.ode`` with this relative tolerance (and an
    absolute one a hundred times smaller) instead of ``odeint``'s default of about ``1.5e-8``.
    Measured here it is only about twice as cheap at ``rtol=1e-3``: most of a call is the
    Python callback per right-hand-side evaluation, not the number of steps.
    """
    times, observed, _ = lotka_volterra_data(n_times, seed)
    if steps_per_unit is not None:
        ode = _RungeKutta(times, steps_per_unit)
    elif rtol is not None:
        ode = _ToleranceODE(rtol, func=_rates, times=times, n_states=2, n_theta=4, t0=0.0)
    else:
        ode = DifferentialEquation(func=_rates, times=times, n_states=2, n_theta=4, t0=0.0)
    with pm.Model() as model:
        alpha = pm.LogNormal("alpha", np.log(0.5), 0.5)
        beta = pm.LogNormal("beta", np.log(0.03), 0.5)
        gamma = pm.LogNormal("gamma", np.log(0.8), 0.5)
        delta = pm.LogNormal("delta", np.log(0.03), 0.5)
        prey0 = pm.LogNormal("prey0", np.log(30.0), 0.3)
        predator0 = pm.LogNormal("predator0", np.log(6.0), 0.3)
        sigma = pm.HalfNormal("sigma", 0.5)
        solution = ode(y0=[prey0, predator0], theta=[alpha, beta, gamma, delta])
        pm.LogNormal("populations", mu=pm.math.log(solution), sigma=sigma, observed=observed)
    return model


class _RungeKutta:
    """``(y0, theta) -> solution at times`` by fixed-step RK4: a PyTensor ``scan`` over the times.

    (Unrolling the steps instead gave a graph whose gradient took minutes to compile.)
    """

    def __init__(self, times: np.ndarray, steps_per_unit: int) -> None:
        gaps = np.diff(np.concatenate([[0.0], times]))
        if not np.allclose(gaps, 1.0) or steps_per_unit < 1:
            raise ValueError("the Runge-Kutta solve needs the times 1, 2, 3, ... and steps >= 1.")
        self.n_times = len(times)
        self.steps_per_unit = int(steps_per_unit)

    def __call__(self, y0, theta):
        step = 1.0 / self.steps_per_unit
        theta = pt.as_tensor_variable(theta)

        def rates(y):
            return pt.stack(_rates(y, None, theta))

        def unit_of_time(state, theta):
            for _ in range(self.steps_per_unit):
                k1 = rates(state)
                k2 = rates(state + 0.5 * step * k1)
                k3 = rates(state + 0.5 * step * k2)
                k4 = rates(state + step * k3)
                state = state + step / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            return state

        return pytensor.scan(
            unit_of_time,
            outputs_info=[pt.stack([y0[0], y0[1]])],
            non_sequences=[theta],
            n_steps=self.n_times,
            return_updates=False,
        )


class _ToleranceODE(DifferentialEquation):
    """``pm.ode.DifferentialEquation`` whose ``odeint`` solve has the given tolerances.

    PyMC offers no tolerance option, so this overrides its ``_simulate`` (the same code in PyMC
    5.28 and 6.4): the system and its forward sensitivities, solved together as PyMC does.
    """

    def __init__(self, rtol: float, **options) -> None:
        super().__init__(**options)
        self.rtol = float(rtol)

    def _simulate(self, y0, theta):
        augmented_start = np.concatenate([y0, self._sens_ic])
        solution = odeint(
            self._system,
            augmented_start,
            self._augmented_times,
            args=(np.concatenate([y0, theta]),),
            rtol=self.rtol,
            atol=self.rtol * 1e-2,
        ).astype(self._sens_ic.dtype)
        states = solution[1:, : self.n_states]
        sensitivities = solution[1:, self.n_states :].reshape(self.n_times, self.n_states, self.n_p)
        return states, sensitivities


HUDSON_PELTS = np.array(
    [
        [30.0, 4.0],
        [47.2, 6.1],
        [70.2, 9.8],
        [77.4, 35.2],
        [36.3, 59.4],
        [20.6, 41.7],
        [18.1, 19.0],
        [21.4, 13.0],
        [22.0, 8.3],
        [25.4, 9.1],
        [27.1, 7.4],
        [40.3, 8.0],
        [57.0, 12.3],
        [76.6, 19.5],
        [52.3, 45.7],
        [19.5, 51.1],
        [11.2, 29.7],
        [7.6, 15.8],
        [14.6, 9.7],
        [16.2, 10.1],
        [24.7, 8.6],
    ]
)
"""Hare and lynx pelts (thousands) traded by the Hudson's Bay Company, 1900 to 1920."""


def hudson_lynx_hare() -> pm.Model:
    """Lotka-Volterra fitted to the Hudson's Bay pelts, eight parameters, through ``pm.ode``.

    The rates ``theta = (alpha, beta, gamma, delta)`` have normal priors truncated at zero
    (``N(1, 0.5)`` for the two growth and death rates, ``N(0.05, 0.05)`` for the two
    interaction rates), the initial populations ``z_init ~ LogNormal(log 10, 1)`` and the noise
    scales ``sigma ~ LogNormal(-1, 1)``, one per species; the 1900 counts are log-normal around
    ``z_init`` and the later ones around the solution at years 1 to 20.
    """
    times = np.arange(1.0, 21.0)
    ode = DifferentialEquation(func=_rates, times=times, n_states=2, n_theta=4, t0=0.0)
    with pm.Model() as model:
        theta = pm.TruncatedNormal(
            "theta", mu=[1.0, 0.05, 1.0, 0.05], sigma=[0.5, 0.05, 0.5, 0.05], lower=0.0
        )
        z_init = pm.LogNormal("z_init", np.log(10.0), 1.0, shape=2)
        sigma = pm.LogNormal("sigma", -1.0, 1.0, shape=2)
        solution = ode(y0=z_init, theta=theta)
        pm.LogNormal("initial_pelts", pm.math.log(z_init), sigma, observed=HUDSON_PELTS[0])
        pm.LogNormal("pelts", pm.math.log(solution), sigma, observed=HUDSON_PELTS[1:])
    return model
