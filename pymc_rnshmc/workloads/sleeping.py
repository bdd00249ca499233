"""A model as slow as a forward solve: a correlated Gaussian whose evaluation sleeps.

For measuring where the exact evaluations of an expensive model go, and what running them in
parallel gains, without a real solver: each call of the model's logp (with or without its
gradient) takes ``seconds`` more, as a PDE or ODE solve with its adjoint would, and the
posterior is known exactly (``SLEEPING_MEAN``, ``sleeping_covariance(dim)``).
"""

from __future__ import annotations

import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

__all__ = ["SleepingIdentity", "sleeping_covariance", "sleeping_normal"]


class SleepingIdentity(Op):
    """The identity on a vector, taking ``seconds`` per evaluation (its gradient is free)."""

    __props__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        time.sleep(self.seconds)
        outputs[0][0] = np.array(inputs[0], copy=True)

    def pullback(self, inputs, outputs, output_gradients):  # PyTensor 3
        return [output_gradients[0]]

    def grad(self, inputs, output_gradients):  # PyTensor 2
        return [output_gradients[0]]


def sleeping_covariance(dim: int, correlation: float = 0.6) -> np.ndarray:
    """AR(1) covariance with unit variances: ``correlation ** |i - j|``."""
    index = np.arange(dim)
    return correlation ** np.abs(index[:, None] - index[None, :])


def sleeping_normal(dim: int = 5, seconds: float = 0.02, correlation: float = 0.6) -> pm.Model:
    """``x ~ N(0, C)`` (AR(1) ``C``), through a forward model that sleeps ``seconds`` a call."""
    precision = np.linalg.inv(sleeping_covariance(dim, correlation))
    with pm.Model() as model:
        x = pm.Flat("x", shape=dim)
        solved = SleepingIdentity(seconds)(x)
        pm.Potential("likelihood", -0.5 * pt.dot(solved, pt.dot(precision, solved)))
    return model
