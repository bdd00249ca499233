"""Helpers for the step-method tests: deliberately wrong surrogates and chain setup."""

from __future__ import annotations

import copy
import time

import numpy as np

from pymc_rnshmc.surrogates import RandomNetworkSurrogate

WALL_HEIGHT = 50.0
"""Curvature of the ``"wall"`` distortion, in nats per squared posterior sd."""


class WrongCoarseModel:
    """A deliberately wrong coarse model for any model: ``N(0.5, 1.5^2)`` in every coordinate.

    ``q -> (logp, grad logp)`` on the sampler's raveled vector, as ``coarse=`` takes it; a class,
    so that steps holding it pickle.
    """

    def __call__(self, position):
        shifted = np.asarray(position, dtype=float) - 0.5
        return -0.5 * shifted @ shifted / 2.25, -shifted / 2.25


class DistortedSurrogate:
    """A correctly fitted random network surrogate, then deliberately made wrong.

    kind:
      ``"shifted"``   the whole potential moved by ``amount`` posterior sds in every coordinate;
      ``"flattened"`` the force multiplied by ``amount`` (< 1: too weak);
      ``"nan"``       a NaN gradient everywhere;
      ``"nan_far"``   a NaN gradient beyond ``amount`` posterior sds from the centre;
      ``"overflow"``  an overflowing force beyond ``amount`` posterior sds;
      ``"wall"``      the potential raised by ``WALL_HEIGHT * (z - amount)^2`` where the first
                      coordinate is ``z > amount`` posterior sds above the centre (a smooth
                      wall its trajectories do not cross).
    """

    def __init__(self, kind: str, amount: float = 1.0) -> None:
        self.kind = kind
        self.amount = amount
        # no ceiling: it would soften the distortions far from the training points
        self.inner = RandomNetworkSurrogate(ceiling=False)

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

    def _beyond_wall(self, position):
        return np.maximum((position[..., 0] - self.centre[0]) / self.scale[0] - self.amount, 0.0)

    def potential(self, positions):
        if self.kind == "wall":
            return self.inner.potential(positions) + WALL_HEIGHT * self._beyond_wall(positions) ** 2
        if self.kind == "shifted":
            return self.inner.potential(positions - self.amount * self.scale)
        if self.kind == "flattened":
            return self.amount * self.inner.potential(positions)
        return self.inner.potential(positions)

    def gradient(self, position):
        if self.kind == "shifted":
            return self.inner.gradient(position - self.amount * self.scale)
        gradient = self.inner.gradient(position)
        if self.kind == "wall":
            gradient = np.array(gradient, dtype=float)
            gradient[..., 0] += 2 * WALL_HEIGHT * self._beyond_wall(position) / self.scale[0]
            return gradient
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


class SlowFit(RandomNetworkSurrogate):
    """A network whose fit first waits ``seconds`` (as a model's first evaluation compiles, or
    a wide fit takes long); ``evaluates``: it declares ``fit_evaluates_models``."""

    def __init__(self, seconds: float, evaluates: bool = False) -> None:
        super().__init__()
        self.seconds = seconds
        self.fit_evaluates_models = evaluates

    def fit(self, *args, **kwargs):
        time.sleep(self.seconds)
        return super().fit(*args, **kwargs)


class _DistortedLearner:
    """Learns like the inner surrogate's learner; hands out equally distorted copies."""

    def __init__(self, distorted, learner):
        self.distorted, self.learner = distorted, learner

    @property
    def n_points(self):
        return self.learner.n_points

    def add(self, position, potential, gradient=None):
        self.learner.add(position, potential, gradient)

    def updated_surrogate(self, fast_only=False):
        updated = copy.copy(self.distorted)
        updated.inner = self.learner.updated_surrogate(fast_only)
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


def sample_with(
    step_class,
    model,
    *,
    tune: int,
    draws: int,
    seed: int,
    chains: int = 2,
    cores: int = 1,
    keep_tuning: bool = False,
    **step_options,
):
    """``pm.sample`` with a fresh ``step_class(**step_options)``, quietly; ``(result, step)``.

    Costs are not weighed unless asked (``weigh_costs``): these tests sample cheap models to
    check the surrogate's machinery, where measured costs would rightly give some surrogates up
    for exact NUTS (``test_economy.py``), and timings would make the draws depend on more than
    the seed.
    """
    step_options.setdefault("weigh_costs", False)
    with model:
        step = step_class(**step_options)
    result = sample_step(
        model,
        step,
        tune=tune,
        draws=draws,
        chains=chains,
        cores=cores,
        seed=seed,
        keep_tuning=keep_tuning,
    )
    return result, step


def sample_step(
    model,
    step,
    *,
    tune: int,
    draws: int,
    chains: int = 1,
    cores: int = 1,
    seed: int = 3,
    keep_tuning: bool = True,
    **options,
):
    """``pm.sample`` of ``model`` with ``step``, quietly, keeping the tuning draws by default."""
    import pymc as pm

    with model:
        return pm.sample(
            step=step,
            tune=tune,
            draws=draws,
            chains=chains,
            cores=cores,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=not keep_tuning,
            **options,
        )


def assert_correlated_normal(idata, label: str = "", min_ess=200, correlation: bool = True):
    """Means and sds of ``tests.models.correlated_normal`` (and ``E[z1 z2]``, the correlation)."""
    from tests.checks import assert_moments, posterior_draws
    from tests.models import CORRELATED_COVARIANCE, CORRELATED_MEAN

    x = posterior_draws(idata, "x")
    sds = np.sqrt(np.diag(CORRELATED_COVARIANCE))
    for i in range(2):
        assert_moments(x[..., i], CORRELATED_MEAN[i], sds[i], f"{label} x[{i}]", min_ess=min_ess)
    if correlation:
        product = np.prod((x - CORRELATED_MEAN) / sds, axis=-1)
        rho = CORRELATED_COVARIANCE[0, 1] / (sds[0] * sds[1])
        assert_moments(product, rho, np.sqrt(1 + rho**2), f"{label} z1 * z2", min_ess=min_ess)


def surrogate_draws(
    idata, least_share: float = 0.8, exact_chains_allowed: bool = False
) -> np.ndarray:
    """The mask of kept draws the surrogate proposed; every other one must be the safety net's.

    The net is on by default, so about a tenth of the draws are exact NUTS (or random-walk)
    draws; the rest, at least ``least_share``, are surrogate draws. With
    ``exact_chains_allowed``, chains the warm-up handed to exact NUTS for good (every kept draw
    of ``phase`` 3: a poor fit, a wall that stood) are left out of both checks, but not all.
    """
    from tests.checks import sample_stat

    used = sample_stat(idata, "used_surrogate")
    net = sample_stat(idata, "safety_net")
    drawn = np.ones(used.shape[0], dtype=bool)
    if exact_chains_allowed:
        drawn = ~(sample_stat(idata, "phase") == 3).all(axis=1)
        assert drawn.any(), "every chain was handed to exact NUTS"
    used, net = used[drawn], net[drawn]
    assert (used ^ net).all(), "a kept draw neither a surrogate nor a safety-net draw"
    assert used.mean() >= least_share, f"surrogate share {used.mean():.2f}"
    return used
