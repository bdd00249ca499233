"""Sampler statistics and progress-bar columns shared by the surrogate HMC step methods."""

from __future__ import annotations

from typing import Any

import numpy as np
from pymc.stats.convergence import SamplerWarning

from pymc_rnshmc.hmc.transition import DrawResult

__all__ = [
    "ALONE_PHASE",
    "PHASES",
    "SURROGATE_HMC_STATS",
    "exact_draw_stats",
    "nuts_stats_to_surrogate_stats",
    "progressbar_config",
    "surrogate_draw_stats",
]


SURROGATE_HMC_STATS: dict[str, tuple[Any, list | None]] = {
    "accept": (np.float64, []),
    "accepted": (np.float64, []),
    "diverging": (bool, []),
    "divergences": (int, []),
    "energy": (np.float64, []),
    "energy_error": (np.float64, []),
    "n_steps": (np.int64, []),
    "tree_depth": (np.int64, []),
    "reached_max_treedepth": (bool, []),
    "index_in_trajectory": (np.int64, []),
    "step_size": (np.float64, []),
    "step_size_bar": (np.float64, []),
    "model_logp": (np.float64, []),
    "n_logp_evals": (np.int64, []),
    "n_gradient_evals": (np.int64, []),
    "used_surrogate": (bool, []),
    "safety_net": (bool, []),
    "phase": (np.int8, []),
    "surrogate_error": (np.float64, []),
    "surrogate_accept": (np.float64, []),
    "left_trust_region": (bool, []),
    "model_failures": (np.int64, []),
    "largest_eigval": (np.float64, []),
    "smallest_eigval": (np.float64, []),
    "perf_counter_diff": (np.float64, []),
    "process_time_diff": (np.float64, []),
    "perf_counter_start": (np.float64, []),
    "warning": (SamplerWarning, None),
}
"""Stats of every draw. PyMC's names where they exist; ``model_logp`` becomes ``lp`` in the
result. ``accepted`` (1.0 where the draw moved, 0.0 where it stayed) has the type of PyMC's
``Metropolis``, which PyMC assigns to a model's integer variables beside this step: PyMC's trace
refuses two step methods whose stats share a name but not a type (its own ``HamiltonianMC``,
whose ``accepted`` is a bool, cannot sample beside ``Metropolis`` in PyMC 5.28 or 6.4).
Every other name shared with PyMC's ``NUTS`` has its type (``divergences`` an ``int``), so that
the step samples beside the NUTS PyMC gives the variables it does not sample; ``DEMetropolisZ``
and ``HamiltonianMC`` declare ``accepted`` a bool and cannot share a model with it.
``n_logp_evals`` and ``n_gradient_evals`` count exact evaluations of the model (a joint
logp-and-gradient call counts in both). ``surrogate_error`` is how much the surrogate misjudged
the potential change of the proposal, ``(U(q*) - U(q)) - (U~(q*) - U~(q))``: on every draw
during tuning, on every tenth after it (NaN on the others; it costs about a leapfrog step),
and on every draw with ``dynamics="nuts"`` (free: the tree knows ``U~`` at both ends). On a
safety-net draw that moved it is minus the wall the exact draw crossed
(:mod:`pymc_rnshmc.step_methods.wall_watch`).
``surrogate_accept`` is the acceptance on the surrogate's own Hamiltonian, which the step size
adapts on: a NUTS tree's mean acceptance statistic (the first stage of delayed acceptance), or
for a leapfrog the Metropolis probability on ``U~ + K`` when ``surrogate_error`` is computed
(NaN otherwise); ``accept`` is the exact test's probability (the second stage).
``tree_depth`` is the surrogate NUTS tree's depth (0 for a leapfrog). ``safety_net`` marks an
exact draw after tuning in place of a surrogate one (:mod:`pymc_rnshmc.step_methods.safety_net`).
``phase`` is what the chain was doing, as a code of :data:`PHASES`: exploring with its exact
sampler, a surrogate draw, a safety-net draw, exact draws for good after a fall-back, or a
tuning draw on the surrogate alone (no exact evaluation: its ``model_logp`` is ``-U~``).
``model_failures`` counts the exact evaluations in the draw where the model's logp was NaN or
infinite or raised an error it rejects (:mod:`pymc_rnshmc.step_methods.model_failures`); each
such point was rejected. ``left_trust_region`` marks a surrogate trajectory rejected because it
needed the exact force at too many points (see :mod:`pymc_rnshmc.hmc.force_field`). In surrogate
draws ``largest_eigval`` and ``smallest_eigval`` describe the metric of the surrogate dynamics
(the eigenvalues of its inverse mass matrix); in exact NUTS draws they are PyMC's."""

PHASES = ("exploring", "surrogate", "safety net", "exact", "surrogate alone")
"""The labels of the ``phase`` stat's codes 0-4 (the progress bar shows them)."""
ALONE_PHASE = 4
"""The ``phase`` code of a tuning draw on the surrogate alone."""

_NUTS_RENAMES = {"depth": "tree_depth", "mean_tree_accept": "accept", "tree_size": "n_steps"}
_EXACT_DRAW = {
    "used_surrogate": False,
    "safety_net": False,
    "surrogate_error": np.nan,
    "surrogate_accept": np.nan,
    "left_trust_region": False,
}
"""The surrogate's stats on an exact draw (the step marks a safety-net draw itself)."""


def nuts_stats_to_surrogate_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """Translate one draw's PyMC NUTS stats into :data:`SURROGATE_HMC_STATS`."""
    converted = {_NUTS_RENAMES.get(key, key): value for key, value in stats.items()}
    converted.pop("max_energy_error", None)
    n_steps = int(converted["n_steps"])
    converted["n_steps"] = n_steps
    converted["accepted"] = float(converted["index_in_trajectory"] != 0)
    converted["n_logp_evals"] = n_steps + 1
    converted["n_gradient_evals"] = n_steps + 1
    converted["phase"] = 0
    return converted | _EXACT_DRAW


def surrogate_draw_stats(
    result: DrawResult,
    *,
    divergences: int,
    step_size_bar: float,
    tuning: bool,
    metric_range: tuple[float, float],
    warning: SamplerWarning | None,
) -> dict[str, Any]:
    """The stats of a surrogate draw (without ``phase`` and ``model_failures``).

    ``metric_range``: the smallest and largest eigenvalue of the inverse mass matrix the draw's
    trajectories used.
    """
    smallest, largest = metric_range
    return {
        "accept": result.accept,
        "accepted": float(result.accepted),
        "diverging": result.divergence is not None,
        "divergences": divergences,
        "energy": result.energy,
        "energy_error": result.energy_change if np.isfinite(result.energy_change) else np.nan,
        "n_steps": result.n_steps,
        "tree_depth": result.tree_depth,
        "reached_max_treedepth": result.reached_max_depth and not tuning,
        "index_in_trajectory": result.index_in_trajectory,
        "step_size": result.step_size,
        "step_size_bar": step_size_bar,
        "model_logp": result.end.logp,
        "n_logp_evals": result.n_logp_evals,
        "n_gradient_evals": result.n_gradient_evals,
        "used_surrogate": True,
        "safety_net": False,
        "surrogate_error": result.surrogate_error,
        "surrogate_accept": result.integrator_accept,
        "left_trust_region": result.left_trust_region,
        "smallest_eigval": smallest,
        "largest_eigval": largest,
        "warning": warning,
    }


def exact_draw_stats(
    *,
    accept: float,
    accepted: bool,
    logp: float,
    energy_error: float,
    n_steps: int,
    step_size: float,
    step_size_bar: float,
    n_logp_evals: int,
    n_gradient_evals: int,
    divergences: int,
    eigenvalue_range: tuple[float, float] = (np.nan, np.nan),
) -> dict[str, Any]:
    """The stats of an exact draw that is not one of PyMC's NUTS draws.

    A random-walk draw, or a NUTS draw that could not start (a counted rejection); the phase,
    the failures and, for the safety net, its flag are set by the step.
    """
    smallest, largest = eigenvalue_range
    return {
        "accept": accept,
        "accepted": float(accepted),
        "diverging": False,
        "divergences": divergences,
        "energy": -logp,
        "energy_error": energy_error if np.isfinite(energy_error) else np.nan,
        "n_steps": n_steps,
        "tree_depth": 0,
        "reached_max_treedepth": False,
        "index_in_trajectory": int(accepted),
        "step_size": step_size,
        "step_size_bar": step_size_bar,
        "model_logp": logp,
        "n_logp_evals": n_logp_evals,
        "n_gradient_evals": n_gradient_evals,
        "smallest_eigval": smallest,
        "largest_eigval": largest,
        "warning": None,
    } | _EXACT_DRAW


def progressbar_config(n_chains: int = 1):
    """Columns and initial values for PyMC's progress bar."""
    from rich.progress import TextColumn
    from rich.table import Column

    columns = [
        TextColumn("{task.fields[divergences]}", table_column=Column("Divergences", ratio=1)),
        TextColumn("{task.fields[step_size]:0.3f}", table_column=Column("Step size", ratio=1)),
        TextColumn("{task.fields[n_gradient_evals]}", table_column=Column("Grad evals", ratio=1)),
        TextColumn("{task.fields[n_logp_evals]}", table_column=Column("Logp evals", ratio=1)),
        TextColumn("{task.fields[accept]:0.2f}", table_column=Column("Accept", ratio=1)),
        TextColumn("{task.fields[phase]}", table_column=Column("Phase", ratio=1)),
    ]
    stats = {
        "divergences": [0] * n_chains,
        "step_size": [0.0] * n_chains,
        "n_gradient_evals": [0] * n_chains,
        "n_logp_evals": [0] * n_chains,
        "accept": [0.0] * n_chains,
        "phase": [PHASES[0]] * n_chains,
    }
    return columns, stats


def progressbar_update_functions() -> tuple:
    """PyMC's ``_make_progressbar_update_functions`` for the samplers' steps."""
    return (progressbar_update,)


def progressbar_update(stats: dict[str, Any]) -> dict[str, Any]:
    """Progress-bar fields from one draw's stats."""
    return {
        "divergences": stats["divergences"],
        "step_size": stats["step_size"],
        "n_gradient_evals": stats["n_gradient_evals"],
        "n_logp_evals": stats["n_logp_evals"],
        "accept": float(stats["accept"]) if np.isfinite(stats["accept"]) else 0.0,
        "phase": PHASES[int(stats["phase"])],
        "failing": stats["divergences"] > 0,
    }
