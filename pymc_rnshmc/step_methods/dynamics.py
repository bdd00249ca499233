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

Either way a draw costs one exact logp and no exact gradient after tuning.
"""

from __future__ import annotations

from typing import Protocol

from pymc_rnshmc.hmc.corrections import Correction, DelayedAcceptance, ExactMetropolis
from pymc_rnshmc.hmc.proposals import LeapfrogProposal, NutsProposal, Proposal
from pymc_rnshmc.hmc.trajectory_tuning import TrajectoryCandidate
from pymc_rnshmc.surrogates.base import Capabilities

__all__ = ["DYNAMICS", "Dynamics", "LeapfrogDynamics", "NutsDynamics", "get_dynamics"]


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
    # PyMC's NUTS default: the second stage never sees the integrator's error (the tree's
    # weights absorb it), and on the elliptic PDE and the logistic regression 0.8 gave as
    # much ESS per draw as 0.9 or 0.95 with half the tree steps.
    target_accept = 0.8
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

    def proposal(
        self, choice: TrajectoryCandidate, max_steps: int, max_depth: int, max_energy_change: float
    ) -> Proposal:
        return NutsProposal(choice.metric, max_depth, max_energy_change)

    def correction(self, max_energy_change: float) -> Correction:
        return DelayedAcceptance(max_energy_change)


DYNAMICS: dict[str, Dynamics] = {"hmc": LeapfrogDynamics(), "nuts": NutsDynamics()}


def get_dynamics(name: str) -> Dynamics:
    """The dynamics called ``name``; the error lists the valid names."""
    try:
        return DYNAMICS[name]
    except (KeyError, TypeError):
        valid = ", ".join(repr(key) for key in DYNAMICS)
        raise ValueError(f"dynamics must be one of {valid}; got {name!r}.") from None
