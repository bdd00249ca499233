"""Helpers for the step-method tests: deliberately wrong surrogates and chain setup."""

from __future__ import annotations

import copy

import numpy as np

from pymc_rnshmc.surrogates import RandomNetworkSurrogate


class DistortedSurrogate:
    """A correctly fitted random network surrogate, then deliberately made wrong.

    kind:
      ``"shifted"``   the whole potential moved by ``amount`` posterior sds in every coordinate;
      ``"flattened"`` the force multiplied by ``amount`` (< 1: too weak);
      ``"nan"``       a NaN gradient everywhere;
      ``"nan_far"``   a NaN gradient beyond ``amount`` posterior sds from the centre;
      ``"overflow"``  an overflowing force beyond ``amount`` posterior sds.
    """

    def __init__(self, kind: str, amount: float = 1.0) -> None:
        self.kind = kind
        self.amount = amount
        self.inner = RandomNetworkSurrogate()

    def fit(self, positions, potentials, gradients=None, rng=None):
        self.inner.fit(positions, potentials, gradients, rng=rng)
        self.centre = positions.mean(axis=0)
        self.scale = positions.std(axis=0)
        return self

    def online_estimator(self, positions, potentials, gradients=None):
        return _DistortedLearner(
            self, self.inner.online_estimator(positions, potentials, gradients)
        )

    def _distance(self, position):
        return np.max(np.abs((position - self.centre) / self.scale), axis=-1)

    def potential(self, positions):
        if self.kind == "shifted":
            return self.inner.potential(positions - self.amount * self.scale)
        if self.kind == "flattened":
            return self.amount * self.inner.potential(positions)
        return self.inner.potential(positions)

    def gradient(self, position):
        if self.kind == "shifted":
            return self.inner.gradient(position - self.amount * self.scale)
        gradient = self.inner.gradient(position)
        if self.kind == "flattened":
            return self.amount * gradient
        if self.kind == "nan":
            return np.full_like(gradient, np.nan)
        far = self._distance(position) > self.amount
        if self.kind == "nan_far":
            return np.where(np.expand_dims(far, -1), np.nan, gradient)
        if self.kind == "overflow":
            return np.where(np.expand_dims(far, -1), 1e308 * np.sign(gradient), gradient)
        raise ValueError(self.kind)


class _DistortedLearner:
    """Learns like the inner surrogate's learner; hands out equally distorted copies."""

    def __init__(self, distorted, learner):
        self.distorted, self.learner = distorted, learner

    @property
    def n_points(self):
        return self.learner.n_points

    def add(self, position, potential, gradient=None):
        self.learner.add(position, potential, gradient)

    def updated_surrogate(self):
        updated = copy.copy(self.distorted)
        updated.inner = self.learner.updated_surrogate()
        return updated


def start_chain(step, seed: int, tune: int, draws: int) -> None:
    """Prepare ``step`` for a chain as ``pm.sample`` does (PyMC 6 or PyMC 5)."""
    from pymc.step_methods.compound import BlockedStep

    rng = np.random.default_rng(seed)
    if hasattr(BlockedStep, "setup_chain"):
        step.setup_chain(rng, tune, draws)
    else:
        step.set_rng(rng)
    step.tune = tune > 0
