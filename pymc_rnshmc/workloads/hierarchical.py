"""Posteriors whose curvature changes across them: Neal's funnel and the eight schools.

Where one mass matrix cannot fit (the funnel's neck needs steps a hundred times smaller than
its mouth), PyMC's NUTS diverges; these are the workloads of Riemannian dynamics (RNSRMHMC).
"""

from __future__ import annotations

import numpy as np
import pymc as pm

from pymc_rnshmc.workloads import posteriordb

__all__ = [
    "EIGHT_SCHOOLS",
    "eight_schools_centered",
    "eight_schools_noncentered",
    "neals_funnel",
]

EIGHT_SCHOOLS = {
    "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
    "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]),
}
"""Rubin (1981): estimated coaching effects and their standard errors (posteriordb's data)."""


def neals_funnel(dim: int = 10, scale_sd: float = 3.0) -> pm.Model:
    """Neal (2003): ``v ~ N(0, 3)``, ``x_i | v ~ N(0, exp(v / 2))`` for ``dim - 1`` coordinates.

    ``scale_sd`` replaces the 3 (a milder funnel below it). The exact marginal of ``v`` is
    ``N(0, scale_sd)``: for 3 its 5 % and 95 % quantiles are -4.93 and 4.93.
    """
    with pm.Model() as model:
        v = pm.Normal("v", 0.0, scale_sd)
        pm.Normal("x", 0.0, pm.math.exp(v / 2.0), shape=dim - 1)
    return model


def eight_schools_centered() -> pm.Model:
    """The centred parameterisation: ``theta_j ~ N(mu, tau)``, a funnel in ``(log tau, theta)``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=8)
        pm.Normal("y", theta, EIGHT_SCHOOLS["sigma"], observed=EIGHT_SCHOOLS["y"])
    return model


def eight_schools_noncentered() -> pm.Model:
    """The non-centred parameterisation of the same posterior (posteriordb's).

    ``theta = mu + tau * theta_trans`` with ``theta_trans_j ~ N(0, 1)``: the builder of
    :mod:`pymc_rnshmc.workloads.posteriordb` on :data:`EIGHT_SCHOOLS`.
    """
    return posteriordb.eight_schools_noncentered(EIGHT_SCHOOLS)
