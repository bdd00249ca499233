"""One draw of surrogate HMC inside a PyMC step: surrogate trajectory, exact Metropolis test.

Shared by the surrogate step methods. The host class is a PyMC ``BaseHMC`` subclass that
provides ``potential`` (the mass matrix), ``step_adapt`` (dual averaging), ``rng``, ``tune``,
``Emax``, ``iter_count`` and the divergence counters, plus ``surrogate``, ``path_length``,
``max_steps``, ``_metric`` (:mod:`pymc_rnshmc.hmc.metrics`), ``_step_size_bounds``,
``_exact_logp`` and ``_cache``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from pymc.blocking import RaveledVars
from pymc.exceptions import SamplingError
from pymc.stats.convergence import SamplerWarning, WarningType

from pymc_rnshmc.exceptions import MODEL_ERRORS, SurrogateWarning
from pymc_rnshmc.hmc.acceptance import metropolis_accept
from pymc_rnshmc.hmc.leapfrog import jittered_n_steps, leapfrog

__all__ = ["SurrogateDynamicsMixin"]


class SurrogateDynamicsMixin:
    """Adds ``_surrogate_astep`` to a PyMC HMC step method."""

    def _force(self, position: np.ndarray) -> np.ndarray:
        """Gradient field of the trajectories.

        The surrogate's, or the exact one where the surrogate's is not finite or implausibly
        large. Either way it is a fixed function of the position, so the leapfrog stays reversible
        and volume preserving (the sparse-grid HMC paper's eq. 3.11 mixes fields the same way),
        and a surrogate that fails somewhere cannot wall that region off from the chain.
        """
        gradient = self.surrogate.gradient(position)
        with np.errstate(invalid="ignore"):
            if (np.abs(gradient) <= self._force_bound).all():  # False for NaN as well
                return gradient
        self._exact_forces += 1
        return self._exact_potential_and_gradient(position)[1]

    def _exact_potential_and_gradient(self, position: np.ndarray) -> tuple[float, np.ndarray]:
        """Exact ``U = -logp`` and its gradient in one model call (``inf`` and NaN on failure)."""
        try:
            logp, logp_gradient = self._logp_dlogp_func._pytensor_function(
                np.ascontiguousarray(position, dtype=self.dtype)
            )
        except MODEL_ERRORS:
            return np.inf, np.full_like(position, np.nan, dtype=float)
        potential = -float(logp)
        return (potential if not np.isnan(potential) else np.inf), -np.asarray(
            logp_gradient, dtype=float
        )

    def _current_state(self, position: np.ndarray) -> tuple[float, float, np.ndarray, int]:
        """Exact logp, surrogate potential and gradient at ``position``.

        Also returns the number of exact evaluations spent: 0 when the previous draw left
        them cached.
        """
        cache = self._cache
        if (
            cache is not None
            and len(cache) == 5
            and np.array_equal(cache[0], position)
            and self._exact_logp.extras_unchanged(cache[2])
        ):
            return cache[1], cache[3], cache[4], 0
        if (
            cache is not None
            and np.array_equal(cache[0], position)
            and self._exact_logp.extras_unchanged(cache[2])
        ):
            logp, evaluations = cache[1], 0
        else:
            logp, evaluations = self._target_logp(position)
        if not np.isfinite(logp):
            raise SamplingError(
                f"Bad initial energy: the model's logp is {logp} at the current point. "
                "Check the initial values with model.debug() or model.point_logps()."
            )
        surrogate_potential = self._surrogate_potential(position, logp)
        gradient = np.asarray(self._force(position), dtype=float)
        return logp, surrogate_potential, gradient, evaluations

    def _surrogate_potential(self, position: np.ndarray, exact_logp: float) -> float:
        """Potential of the trajectories' Hamiltonian at ``position`` (exact logp known there)."""
        return float(self.surrogate.potential(position))

    def _target_logp(self, position: np.ndarray) -> tuple[float, int]:
        """Log density of the Metropolis test (the exact one) and the exact evaluations spent."""
        return self._exact_logp(position), 1

    def _evaluate_proposal(self, position: np.ndarray) -> tuple[float, int, int]:
        """Target logp at the end of a trajectory and the exact logps and gradients it took."""
        return (*self._target_logp(position), 0)

    def _adaptation_accept(self, accept: float, integrator_accept: float) -> float:
        """Acceptance the step size is adapted on.

        The integrator's share of rejections, measured on the surrogate's own Hamiltonian: a
        smaller step cannot fix the surrogate's own error, so adapting on the exact acceptance
        would shrink the step for nothing.
        """
        return integrator_accept

    def _surrogate_step_size(self) -> float:
        step_size = float(self.step_adapt.current(self.tune))
        low, high = self._step_size_bounds
        return float(np.clip(step_size, low, high))

    def _surrogate_astep(self, q0: RaveledVars) -> tuple[RaveledVars, list[dict[str, Any]]]:
        perf_start = time.perf_counter()
        process_start = time.process_time()
        position = q0.data
        self._exact_forces = 0
        logp, surrogate_potential, gradient, n_logp_evals = self._current_state(position)

        metric = self._metric
        momentum = metric.random(self.rng)
        start_energy = metric.energy(momentum) - logp
        step_size = self._surrogate_step_size()
        n_steps = jittered_n_steps(self.rng, self.path_length, step_size, self.max_steps)
        with np.errstate(over="ignore", invalid="ignore"):
            trajectory = leapfrog(
                position,
                momentum,
                gradient,
                step_size,
                n_steps,
                self._force,
                metric.velocity,
            )

        message = None
        n_gradient_evals = 0
        proposal_logp = -np.inf
        proposal_surrogate = np.nan
        if trajectory.failed:
            message = "The surrogate gradient or the trajectory became non-finite."
        else:
            proposal_logp, proposal_logp_evals, n_gradient_evals = self._evaluate_proposal(
                trajectory.position
            )
            n_logp_evals += proposal_logp_evals
            if not np.isfinite(proposal_logp):
                message = f"The model's logp is {proposal_logp} at the proposal."
        if message is None:
            with np.errstate(over="ignore", invalid="ignore"):
                proposal_energy = metric.energy(trajectory.momentum) - proposal_logp
            energy_change = proposal_energy - start_energy
            if not np.isfinite(energy_change) or abs(energy_change) > self.Emax:
                message = f"Energy change {energy_change:.3g} exceeds Emax = {self.Emax}."
        else:
            energy_change = np.inf
        accept, accepted = metropolis_accept(energy_change, self.rng)
        accepted = accepted and message is None

        surrogate_error = np.nan
        integrator_accept = 0.0
        if not trajectory.failed:
            with np.errstate(over="ignore", invalid="ignore"):
                proposal_surrogate = self._surrogate_potential(trajectory.position, proposal_logp)
                surrogate_change = (
                    proposal_surrogate
                    - surrogate_potential
                    + metric.energy(trajectory.momentum)
                    - (start_energy + logp)
                )
            if np.isfinite(surrogate_change):
                integrator_accept = float(np.exp(min(0.0, -surrogate_change)))
            if message is None:
                surrogate_error = (logp - proposal_logp) - (
                    proposal_surrogate - surrogate_potential
                )

        if self.tune:
            self.step_adapt.update(self._adaptation_accept(accept, integrator_accept), True)
        if accepted:
            position = trajectory.position
            logp, surrogate_potential, gradient = (
                proposal_logp,
                proposal_surrogate,
                trajectory.gradient,
            )
            energy = proposal_energy
        else:
            energy = start_energy
        self._cache = (
            position.copy(),
            logp,
            self._exact_logp.extra_values(),
            surrogate_potential,
            gradient,
        )

        warning = self._divergence_warning(message, q0) if message else None
        if self._exact_forces and not self.tune and not self._warned_exact_forces:
            self._warned_exact_forces = True
            warnings.warn(
                "The surrogate's gradient was not finite, or implausibly large, at some points "
                f"of a trajectory; {type(self).__name__} used the exact gradient there (counted in "
                "n_gradient_evals). The posterior stays exact, but a surrogate trained on more "
                "of the region would be cheaper.",
                SurrogateWarning,
                stacklevel=2,
            )
        self.iter_count += 1
        perf_end = time.perf_counter()
        stats = {
            "accept": accept,
            "accepted": accepted,
            "diverging": message is not None,
            "divergences": self.divergences,
            "energy": energy,
            "energy_error": energy_change if np.isfinite(energy_change) else np.nan,
            "n_steps": trajectory.n_steps,
            "tree_depth": 0,
            "reached_max_treedepth": False,
            "index_in_trajectory": trajectory.n_steps if accepted else 0,
            "step_size": step_size,
            "step_size_bar": float(self.step_adapt.current(False)),
            "model_logp": logp,
            "n_logp_evals": n_logp_evals + self._exact_forces,
            "n_gradient_evals": n_gradient_evals + self._exact_forces,
            "used_surrogate": True,
            "surrogate_error": surrogate_error,
            "perf_counter_diff": perf_end - perf_start,
            "process_time_diff": time.process_time() - process_start,
            "perf_counter_start": perf_start,
            "warning": warning,
        }
        stats.update(self.potential.stats())
        return RaveledVars(position, q0.point_map_info), [stats]

    def _divergence_warning(self, message: str, q0: RaveledVars) -> SamplerWarning:
        if self.tune:
            kind = WarningType.TUNING_DIVERGENCE
        else:
            kind = WarningType.DIVERGENCE
            self.divergences += 1
            self._num_divs_sample += 1
        return SamplerWarning(kind, message, "debug", self.iter_count)
