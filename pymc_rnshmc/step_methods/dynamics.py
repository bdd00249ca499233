"""The surrogate dynamics a sampler proposes with, and the correction that goes with each.

Two parts with one small protocol, chosen by the samplers' ``dynamics`` option:

* ``"hmc"`` (:class:`LeapfrogDynamics`): a jittered fixed-length leapfrog on the surrogate's
  force field, accepted by the Metropolis test on the exact Hamiltonian; its path length is
  chosen by simulation on the surrogate.
* ``"nuts"`` (:class:`NutsDynamics`): a NUTS transition on the surrogate Hamiltonian, accepted
  by delayed acceptance with the exact density; no path length to choose. It needs a surrogate
  that is a potential defined everywhere, whose gradient is the force. Exactness alone would
  not: the tree is reversible with respect to ``exp(-U~)`` for any fixed force field, since its
  weights ``exp(-U~ - K)`` absorb whatever the integrator gets wrong. But a force that is not
  ``grad U~`` (the grid's piecewise-constant force map) makes energy errors no step size
  removes, so the weights would stop the trees early or pick states at random; and a potential
  that is NaN outside a box makes every tree that reaches the box's edge divergent.

* :class:`RiemannianDynamics` (RNS-RMHMC): the
  generalized leapfrog on the surrogate's SoftAbs curvature, accepted by the Metropolis test on
  the exact Riemannian Hamiltonian; built by :class:`~pymc_rnshmc.RNSRMHMC` with its options.

Either way a draw costs one exact logp and no exact gradient after tuning. Each part also
chooses its own settings on the fitted surrogate (:meth:`Dynamics.choose`) from what the step
knows then (:class:`DynamicsSetting`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pymc_rnshmc._checks import check_flag
from pymc_rnshmc.hmc.corrections import Correction, DelayedAcceptance, ExactMetropolis
from pymc_rnshmc.hmc.generalized_leapfrog import SolverSettings
from pymc_rnshmc.hmc.proposals import LeapfrogProposal, NutsProposal, Proposal
from pymc_rnshmc.hmc.riemannian_metric import METRIC_KINDS, SurrogateGeometry
from pymc_rnshmc.hmc.riemannian_proposal import RiemannianProposal
from pymc_rnshmc.hmc.riemannian_tuning import choose_riemannian_trajectory, path_length_candidates
from pymc_rnshmc.hmc.trajectory_candidates import choose_trajectory
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryCandidate, TrajectoryChoice
from pymc_rnshmc.surrogates.base import Capabilities, for_simulation, simulation_proxy

__all__ = [
    "DYNAMICS",
    "Dynamics",
    "DynamicsSetting",
    "LeapfrogDynamics",
    "NutsDynamics",
    "RiemannianDynamics",
    "get_dynamics",
]


@dataclass(frozen=True)
class DynamicsSetting:
    """What the step knows when it chooses its dynamics' settings on a fitted surrogate.

    Attributes
    ----------
    positions, gradients : ndarray
        The training draws and their gradients (exact, or the surrogate's without them).
    explorer_variances : ndarray or None
        The exact explorer's adapted diagonal metric, if it has one.
    extra_metrics : tuple
        Further candidate metrics (the surrogate's curvature, the random walk's covariance).
    step_size : float
        First guess of the step-size search.
    target_accept : float
        Acceptance on the surrogate's own Hamiltonian to choose the step size for.
    max_steps : int
    rng : numpy.random.Generator
    path_length : float or None
        The user's path length, if given.
    simulated_draws : int
        Length of each simulated chain per candidate.
    refit : bool
        A refit, whose previous choice (``previous``) searched widely already.
    previous : TrajectoryCandidate or None
    out_of_time : callable or None
        ``out_of_time()`` true once the setup's budget is spent: the comparison of metrics and
        the scan of path lengths stop with the candidates scored so far.
    """

    positions: np.ndarray
    gradients: np.ndarray
    explorer_variances: np.ndarray | None
    extra_metrics: tuple
    step_size: float
    target_accept: float
    max_steps: int
    rng: np.random.Generator
    path_length: float | None
    simulated_draws: int
    refit: bool = False
    previous: TrajectoryCandidate | None = None
    out_of_time: Callable[[], bool] | None = None


def _choose_constant_metric(surrogate, setting: DynamicsSetting, scan_lengths: bool):
    return choose_trajectory(
        simulation_proxy(for_simulation(surrogate)),
        setting.explorer_variances,
        setting.positions,
        setting.gradients,
        step_size=setting.step_size,
        target_accept=setting.target_accept,
        max_steps=setting.max_steps,
        rng=setting.rng,
        path_length=setting.path_length,
        simulated_draws=setting.simulated_draws,
        extra_metrics=setting.extra_metrics,
        refit=setting.refit,
        scan_lengths=scan_lengths,
        out_of_time=setting.out_of_time,
    )


class Dynamics(Protocol):
    """How surrogate draws propose and how the exact model corrects them."""

    name: str
    chooses_path_length: bool
    target_accept: float
    """Default acceptance on the surrogate's Hamiltonian that the step size adapts to."""
    uses_cached_force: bool
    """The proposal starts from the chain's cached force (else it evaluates the field itself)."""

    def check(self, surrogate, sampler: str) -> None:
        """Raise ``ValueError`` if these dynamics cannot run on ``surrogate``."""
        ...

    def choose(self, surrogate, setting: DynamicsSetting) -> TrajectoryChoice:
        """Metric, step size (and path length) on the fitted ``surrogate``, by simulation."""
        ...

    def proposal(
        self, choice: TrajectoryCandidate, max_steps: int, max_depth: int, max_energy_change: float
    ) -> Proposal:
        """The proposal with the chosen metric (and path length, if it uses one)."""
        ...

    def correction(self, max_energy_change: float) -> Correction:
        """The exact correction these proposals need."""
        ...


class LeapfrogDynamics:
    """Jittered fixed-length leapfrog, corrected on the exact Hamiltonian."""

    name = "hmc"
    chooses_path_length = True
    # Leapfrog steps on the surrogate are cheap next to a draw's exact logp, and the exact test
    # sees the integrator's error: a high target (docs/benchmarks.md measures the gain).
    target_accept = 0.95
    uses_cached_force = True

    def check(self, surrogate, sampler: str) -> None:
        """Any surrogate with a gradient will do."""

    def choose(self, surrogate, setting: DynamicsSetting) -> TrajectoryChoice:
        """The candidate metrics, each at its quarter period, then path lengths around it."""
        return _choose_constant_metric(surrogate, setting, scan_lengths=True)

    def proposal(
        self, choice: TrajectoryCandidate, max_steps: int, max_depth: int, max_energy_change: float
    ) -> Proposal:
        return LeapfrogProposal(choice.metric, choice.path_length, max_steps)

    def correction(self, max_energy_change: float) -> Correction:
        return ExactMetropolis(max_energy_change)


class NutsDynamics:
    """NUTS on the surrogate Hamiltonian, corrected by delayed acceptance."""

    name = "nuts"
    chooses_path_length = False
    # As the leapfrog's. PyMC's NUTS default of 0.8 lets the trees diverge where a curved
    # posterior narrows: on the sharp banana (2 x 10,000 draws, seeds 1-6) it left two
    # runs' 1 % quantiles 14 MCSE off at bulk ESS 38-372 and 122-702 divergences; 0.95 kept
    # every quantile within 4.5 MCSE at bulk ESS 511-1630. On the logistic regression and the
    # elliptic PDE (3 seeds) ESS and whole call did not change beyond seed-to-seed noise,
    # since the tree's steps are cheap next to the draw's exact logp (docs/benchmarks.md).
    target_accept = 0.95
    uses_cached_force = False

    def check(self, surrogate, sampler: str) -> None:
        """Refuse surrogates that are not a potential defined everywhere."""
        capabilities = Capabilities.of(surrogate)
        if not (capabilities.defined_everywhere and capabilities.gradient_field):
            raise ValueError(
                f"{sampler}(dynamics='nuts') needs a surrogate that is a potential defined "
                "everywhere, whose gradient is the force (such as the random network); "
                f"{type(surrogate).__name__} is not (a grid's box or a force map). Use "
                "dynamics='hmc'."
            )

    def choose(self, surrogate, setting: DynamicsSetting) -> TrajectoryChoice:
        """The candidate metrics only: each tree chooses its own length."""
        return _choose_constant_metric(surrogate, setting, scan_lengths=False)

    def proposal(
        self, choice: TrajectoryCandidate, max_steps: int, max_depth: int, max_energy_change: float
    ) -> Proposal:
        return NutsProposal(choice.metric, max_depth, max_energy_change)

    def correction(self, max_energy_change: float) -> Correction:
        return DelayedAcceptance(max_energy_change)


SOFTABS_FLOOR = 1.0
"""Default SoftAbs sharpness: eigenvalues of ``G`` are lifted to about this multiple of the
smallest curvature the training draws show (one over their largest variance). Where the
surrogate's Hessian has an eigenvalue crossing zero (the banana, away from its ridge), SoftAbs
smooths ``|l|`` over that scale: at 0.01 of it the metric changed so sharply there that the
simulated step size fell to 0.02 for a path of 0.79 (37 steps) and the banana's bulk ESS to
12-43 of 4000 draws; at 1, 2 steps of 0.81 and 86-193."""
RIEMANNIAN_CHAINS = 4
"""Simulated chains when choosing the Riemannian dynamics' settings."""


class RiemannianDynamics:
    """The generalized leapfrog on the surrogate's SoftAbs curvature, corrected exactly.

    Parameters
    ----------
    metric : {"softabs", "diagonal"}
        SoftAbs of the surrogate's Hessian, or of its diagonal (the RNS-RMHMC paper's metric for
        the elliptic PDE; ``O(s d)`` per evaluation instead of ``O(s d^2 + d^3)``).
    softabs_alpha : float, optional
        SoftAbs sharpness; default from the training draws (:data:`SOFTABS_FLOOR`).
    tolerance : float
        Relative tolerance of the fixed-point iterations.
    max_iterations : int
        Fixed-point iterations of one implicit equation before the trajectory is rejected.
    check_reversibility : bool
        Integrate every trajectory back and reject it unless it returns to its start.
    """

    name = "riemannian"
    chooses_path_length = True
    # a step costs tens of surrogate gradients, so a lower target than the leapfrog's 0.95
    target_accept = 0.9
    uses_cached_force = False

    def __init__(
        self,
        metric: str = "softabs",
        softabs_alpha: float | None = None,
        tolerance: float = 1e-9,
        max_iterations: int = 100,
        check_reversibility: bool = True,
    ) -> None:
        if metric not in METRIC_KINDS:
            raise ValueError(f"metric must be one of {METRIC_KINDS}; got {metric!r}.")
        self.metric = metric
        self.softabs_alpha = softabs_alpha
        self.settings = SolverSettings(float(tolerance), int(max_iterations))
        self.check_reversibility = check_flag("check_reversibility", check_reversibility)

    def check(self, surrogate, sampler: str) -> None:
        """Refuse surrogates without closed-form curvature (only the additive network has it)."""
        if getattr(surrogate, "hidden_units", None) != "additive" or not hasattr(
            surrogate, "ridge_form"
        ):
            raise ValueError(
                f"{sampler} needs the random network surrogate with additive units (its Hessian "
                f"and third derivatives are closed-form); got {type(surrogate).__name__}"
                f"{' with radial units' if hasattr(surrogate, 'ridge_form') else ''}."
            )

    def alpha(self, positions: np.ndarray) -> float:
        """The SoftAbs sharpness: the given one, or from the training draws' spread."""
        if self.softabs_alpha is not None:
            return float(self.softabs_alpha)
        covariance = np.atleast_2d(np.cov(positions, rowvar=False))
        largest = float(np.linalg.eigvalsh(covariance)[-1])
        if not (np.isfinite(largest) and largest > 0):
            raise ValueError("the training draws do not spread: no scale for the SoftAbs metric")
        return largest / SOFTABS_FLOOR

    def choose(self, surrogate, setting: DynamicsSetting) -> TrajectoryChoice:
        """Step size and path length around a quarter period, on the surrogate's geometry."""
        geometry = SurrogateGeometry(
            surrogate.ridge_form(), self.metric, self.alpha(setting.positions)
        )
        positions = setting.positions
        chosen = np.linspace(0, positions.shape[0] - 1, min(RIEMANNIAN_CHAINS, len(positions)))
        previous = None if setting.previous is None else setting.previous.path_length
        return choose_riemannian_trajectory(
            geometry,
            positions[chosen.round().astype(int)],
            setting.step_size if setting.previous is None else setting.previous.step_size,
            setting.target_accept,
            path_length_candidates(previous, setting.path_length),
            setting.rng,
            self.settings,
            max_steps=setting.max_steps,
        )

    def proposal(
        self, choice: TrajectoryCandidate, max_steps: int, max_depth: int, max_energy_change: float
    ) -> Proposal:
        return RiemannianProposal(
            choice.metric, choice.path_length, max_steps, self.settings, self.check_reversibility
        )

    def correction(self, max_energy_change: float) -> Correction:
        return ExactMetropolis(max_energy_change)


DYNAMICS: dict[str, Dynamics] = {"hmc": LeapfrogDynamics(), "nuts": NutsDynamics()}


def get_dynamics(name: str | Dynamics) -> Dynamics:
    """The dynamics called ``name`` (or ``name`` itself, if it is a part already).

    The error lists the valid names.
    """
    if not isinstance(name, str) and hasattr(name, "choose"):
        return name
    try:
        return DYNAMICS[name]
    except (KeyError, TypeError):
        valid = ", ".join(repr(key) for key in DYNAMICS)
        raise ValueError(f"dynamics must be one of {valid}; got {name!r}.") from None
