"""After tuning, say once per chain when the exact acceptance is poor, why, and what to try.

A surrogate draw can be rejected for two reasons the statistics tell apart: its trajectory did
not keep its own Hamiltonian (the integrator's error: the step size is too large for the
surrogate's dynamics), or it did and the exact density disagreed (the surrogate's error: it is
wrong where the chain goes). :class:`AcceptanceMonitor` watches the first ``draws`` surrogate
draws after tuning and, if their mean exact acceptance is below ``poor``, returns a message that
names the reason and the remedy; the draws stay exact either way, they only mix slowly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["AcceptanceMonitor"]

INTEGRATOR_KEEPS = 0.7
"""Mean acceptance on the surrogate's own Hamiltonian above which the integrator is not blamed."""


@dataclass
class AcceptanceMonitor:
    """Judges the first ``draws`` surrogate draws after tuning, once.

    Parameters
    ----------
    sampler : str
        The sampler's name, for the message.
    draws : int
        Surrogate draws after tuning to judge.
    poor : float
        Mean exact acceptance below which the message is given.
    richer_surrogate : str
        How to give this sampler's surrogate more capacity, for the message.
    """

    sampler: str
    draws: int = 200
    poor: float = 0.4
    richer_surrogate: str = "the network more units (n_hidden)"
    _accept: list = field(default_factory=list)
    _integrator: list = field(default_factory=list)
    _errors: list = field(default_factory=list)
    _done: bool = False

    def record(self, accept: float, integrator_accept: float, surrogate_error: float) -> str | None:
        """Note one draw; the message, the one time the judgement finds acceptance poor."""
        if self._done:
            return None
        self._accept.append(accept if np.isfinite(accept) else 0.0)
        if np.isfinite(integrator_accept):
            self._integrator.append(integrator_accept)
        if np.isfinite(surrogate_error):
            self._errors.append(abs(surrogate_error))
        if len(self._accept) < self.draws:
            return None
        self._done = True
        accept = float(np.mean(self._accept))
        if accept >= self.poor:
            return None
        return self._message(accept)

    def _message(self, accept: float) -> str:
        head = (
            f"{self.sampler}'s exact acceptance in its first {self.draws} draws after tuning was "
            f"{accept:.2f}."
        )
        integrator = float(np.mean(self._integrator)) if self._integrator else np.nan
        tail = (
            " The draws are still exact, but they mix slowly; plot_surrogate(step, idata) shows "
            "where."
        )
        if np.isfinite(integrator) and integrator < INTEGRATOR_KEEPS:
            return (
                f"{head} Its trajectories do not keep even the surrogate's own Hamiltonian "
                f"(acceptance {integrator:.2f} there): the step size is too large for the "
                "surrogate's dynamics. Raise surrogate_target_accept, or tune longer." + tail
            )
        error = float(np.median(self._errors)) if self._errors else np.nan
        return (
            f"{head} Its trajectories keep the surrogate's own Hamiltonian (acceptance "
            f"{integrator:.2f} there), so the surrogate is wrong where the chain goes (median "
            f"|surrogate error| {error:.3g} nats). Give the exploration more draws (tune, "
            f"exploration_steps) or {self.richer_surrogate}." + tail
        )
