"""Small models with known posteriors, shared by the tests."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pymc as pm
import pytensor.gradient
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_rnshmc.workloads import banana_data

NORMAL_MEAN = np.array([1.0, -2.0, 0.5])
NORMAL_SD = np.array([1.0, 0.5, 2.0])

CORRELATED_MEAN = np.array([1.0, -1.0])
CORRELATED_COVARIANCE = np.array([[1.0, 0.9 * 0.5], [0.9 * 0.5, 0.25]])


class WithoutGradient(Op):
    """The identity on a tensor, with no gradient: makes any model a black box to PyTensor.

    ``pytensor.gradient.grad`` through it raises, as through a simulator wrapped in an ``Op``.
    """

    __props__ = ()

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.array(inputs[0], copy=True)


def black_box(x):
    """``x`` through :class:`WithoutGradient` (PyTensor 3's Numba object-mode notice silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return WithoutGradient()(x)


def independent_normal(gradient: bool = True) -> pm.Model:
    """``x ~ N(NORMAL_MEAN, NORMAL_SD)``, three coordinates; ``gradient=False``: as a black box."""
    with pm.Model() as model:
        if gradient:
            pm.Normal("x", NORMAL_MEAN, NORMAL_SD, shape=3)
        else:
            x = pm.Flat("x", shape=3)
            density = pm.Normal.dist(NORMAL_MEAN, NORMAL_SD, shape=3)
            pm.Potential("likelihood", pm.logp(density, black_box(x)).sum())
    return model


def correlated_normal(gradient: bool = True) -> pm.Model:
    """Two-dimensional normal with correlation 0.9 and unequal scales (or as a black box)."""
    with pm.Model() as model:
        if gradient:
            pm.MvNormal("x", CORRELATED_MEAN, CORRELATED_COVARIANCE)
        else:
            x = pm.Flat("x", shape=2)
            density = pm.MvNormal.dist(CORRELATED_MEAN, CORRELATED_COVARIANCE)
            pm.Potential("likelihood", pm.logp(density, black_box(x)))
    return model


def beta_binomial(gradient: bool = True) -> pm.Model:
    """``p ~ Beta(2, 3)``, 7 successes in 20 trials: posterior ``Beta(9, 16)`` (logit space).

    ``gradient=False``: the likelihood of a black box of ``p``.
    """
    with pm.Model() as model:
        p = pm.Beta("p", 2.0, 3.0)
        if gradient:
            pm.Binomial("y", n=20, p=p, observed=7)
        else:
            pm.Potential("likelihood", pm.logp(pm.Binomial.dist(n=20, p=black_box(p)), 7))
    return model


def gamma_poisson() -> pm.Model:
    """``rate ~ Gamma(2, 1)``, five Poisson counts summing to 12: posterior ``Gamma(14, 6)``."""
    with pm.Model() as model:
        rate = pm.Gamma("rate", 2.0, 1.0)
        pm.Poisson("y", rate, observed=np.array([3, 1, 4, 2, 2]))
    return model


BANANA_SIGMA_Y = 2.0


EIGHT_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def centred_eight_schools() -> pm.Model:
    """Eight schools, centred: a density without a mode (it grows as ``tau -> 0``)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=8)
        pm.Normal("y", theta, EIGHT_SCHOOLS_SIGMA, observed=EIGHT_SCHOOLS_Y)
    return model


def banana_reference_moments(data: np.ndarray | None = None, n_grid: int = 1201):
    """Posterior means and sds of the banana (:func:`pymc_rnshmc.workloads.banana`) by
    quadrature on a fine grid."""
    data = banana_data() if data is None else data
    axis = np.linspace(-6.0, 6.0, n_grid)
    b1, b2 = np.meshgrid(axis, axis, indexing="ij")
    location = b1 + b2**2
    n, total, squares = data.size, data.sum(), np.sum(data**2)
    log_density = -(squares - 2 * location * total + n * location**2) / (2 * BANANA_SIGMA_Y**2)
    log_density -= 0.5 * (b1**2 + b2**2)
    weights = np.exp(log_density - log_density.max())
    weights /= weights.sum()
    means = np.array([np.sum(weights * b1), np.sum(weights * b2)])
    sds = np.sqrt([np.sum(weights * b1**2), np.sum(weights * b2**2)] - means**2)
    return means, sds


TRUNCATION = 1.0


def truncated_normal(bad_value: float) -> pm.Model:
    """``x ~ N(0, 1)`` restricted to ``x < 1`` by a potential that is ``bad_value`` beyond.

    ``bad_value`` is ``-inf`` or ``nan``: proposals past the cut have a non-finite logp.
    """
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("cut", pt.switch(x > TRUNCATION, bad_value, 0.0))
    return model


class FailsBeyond(Op):
    """The identity on ``x``, failing where an element exceeds ``limit``, as a forward model can.

    Beyond ``limit`` it raises ``error`` (``None``: returns NaN). With ``gradient=False`` it has
    no gradient, like a wrapped simulator. While :data:`ARMED` holds ``"raise"`` it raises
    ``error`` everywhere, and while it holds ``"interrupt"`` it raises ``KeyboardInterrupt``
    (Ctrl-C arriving inside the model): tests arm it in the phase they mean to hit.
    """

    __props__ = ("limit", "error", "gradient")

    def __init__(self, limit: float, error: type | None = None, gradient: bool = True) -> None:
        self.limit, self.error, self.gradient = float(limit), error, bool(gradient)

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        (x,) = inputs
        if ARMED["mode"] == "interrupt":
            raise KeyboardInterrupt
        failing = ARMED["mode"] == "raise" or np.any(x > self.limit)
        if failing and self.error is not None:
            raise self.error("the forward model failed")
        outputs[0][0] = np.full_like(x, np.nan) if failing else np.array(x, copy=True)

    def grad(self, inputs, output_gradients):
        if not self.gradient:
            return [pytensor.gradient.grad_not_implemented(self, 0, inputs[0])]
        return [output_gradients[0]]


class GradientFailsBeyond(Op):
    """The identity on ``x`` whose gradient raises ``error`` where an element exceeds ``limit``.

    The logp is defined everywhere; only the gradient fails there, as an adjoint solver can
    fail where the forward solve succeeds: a logp-only evaluation (a surrogate draw's end point)
    succeeds at points where an exact NUTS draw cannot start.
    """

    __props__ = ("limit", "error")

    def __init__(self, limit: float, error: type) -> None:
        self.limit, self.error = float(limit), error

    def make_node(self, x, output_gradient):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x, pt.as_tensor_variable(output_gradient)], [x.type()])

    def perform(self, node, inputs, outputs):
        x, output_gradient = inputs
        if np.any(x > self.limit):
            raise self.error("the adjoint solve failed")
        outputs[0][0] = np.array(output_gradient, copy=True)


class IdentityWithFailingGradient(Op):
    """The identity, differentiated by :class:`GradientFailsBeyond`."""

    __props__ = ("limit", "error")

    def __init__(self, limit: float, error: type) -> None:
        self.limit, self.error = float(limit), error

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.array(inputs[0], copy=True)

    def grad(self, inputs, output_gradients):
        return [GradientFailsBeyond(self.limit, self.error)(inputs[0], output_gradients[0])]


def gradient_failing_normal(limit: float, error: type) -> pm.Model:
    """``x ~ N(0, I_2)`` whose logp is defined everywhere but whose gradient raises ``error``
    where ``x`` exceeds ``limit`` (:class:`IdentityWithFailingGradient`)."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            forward = IdentityWithFailingGradient(limit, error)(x)
        pm.Potential("likelihood", -0.5 * pt.sum(forward**2))
    return model


ARMED = {"mode": None}
"""Switch of :class:`FailsBeyond`: ``None``, ``"raise"`` or ``"interrupt"``."""


def failing_normal(limit: float, error: type | None = None, gradient: bool = True) -> pm.Model:
    """``x ~ N(0, 1)`` (two independent coordinates) through a forward model failing beyond
    ``limit`` (:class:`FailsBeyond`): with the failures rejected, the posterior is the normal
    truncated to ``x < limit`` in both coordinates."""
    return normal_through(FailsBeyond(limit, error, gradient))


def normal_through(forward_model: Op) -> pm.Model:
    """``x ~ N(0, I_2)`` with ``x`` passed through ``forward_model`` (an identity ``Op``)."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            forward = forward_model(x)
        pm.Potential("likelihood", -0.5 * pt.sum(forward**2))
    return model


class SlowBeyond(Op):
    """The identity on ``x``, taking ``seconds`` where an element exceeds ``limit``.

    A forward model that runs for minutes at absurd parameters, as an ODE solver can; with
    ``gradient=False`` it has no gradient, like a wrapped simulator.
    """

    __props__ = ("limit", "seconds", "gradient")

    def __init__(self, limit: float, seconds: float, gradient: bool = True) -> None:
        self.limit, self.seconds, self.gradient = float(limit), float(seconds), bool(gradient)

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        (x,) = inputs
        if np.any(x > self.limit):
            time.sleep(self.seconds)
        outputs[0][0] = np.array(x, copy=True)

    def grad(self, inputs, output_gradients):
        if not self.gradient:
            return [pytensor.gradient.grad_not_implemented(self, 0, inputs[0])]
        return [output_gradients[0]]


def slow_normal(limit: float, seconds: float, gradient: bool = True) -> pm.Model:
    """``x ~ N(0, I_2)`` through a forward model that takes ``seconds`` where ``x`` exceeds
    ``limit`` (:class:`SlowBeyond`)."""
    return normal_through(SlowBeyond(limit, seconds, gradient))
