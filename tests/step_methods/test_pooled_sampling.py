"""``pymc_rnshmc.sample``: pm.sample's call for pooled chains, and Ctrl-C keeping the draws."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

import pymc_rnshmc
from pymc_rnshmc import RNSHMC
from tests.checks import posterior_draws
from tests.models import correlated_normal


def test_sample_is_pm_sample_with_pooled_chains():
    with correlated_normal() as model:
        pass
    idata = pymc_rnshmc.sample(
        draws=100, tune=200, chains=2, model=model, random_seed=1, progressbar=False
    )
    assert posterior_draws(idata, "x").shape == (2, 100, 2)


class InterruptedAfter(Op):
    """The identity, until its ``calls``-th evaluation: then Ctrl-C (a ``KeyboardInterrupt``)."""

    __props__ = ("calls",)

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.made = 0

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        self.made += 1
        if self.made > self.calls:
            raise KeyboardInterrupt
        outputs[0][0] = np.array(inputs[0], copy=True)

    def pullback(self, inputs, outputs, output_gradients):  # PyTensor 3
        return [output_gradients[0]]

    def grad(self, inputs, output_gradients):  # PyTensor 2
        return [output_gradients[0]]


def interrupted_normal(calls: int) -> pm.Model:
    with pm.Model() as model:
        x = pm.Flat("x", shape=2)
        pm.Deterministic("twice", 2 * x)
        pm.Potential("likelihood", -0.5 * pt.sum(InterruptedAfter(calls)(x) ** 2))
    return model


def test_ctrl_c_after_tuning_returns_the_draws_so_far():
    def run(calls: int):
        with interrupted_normal(calls):
            return pymc_rnshmc.sample(
                draws=1000,
                tune=300,
                chains=2,
                step=RNSHMC(weigh_costs=False),  # the same draws, however long each took
                random_seed=2,
                progressbar=False,
            )

    with pytest.warns(UserWarning, match="interrupted"):
        interrupted = run(calls=2500)
    draws = posterior_draws(interrupted, "x")
    assert draws.shape[0] == 2 and 0 < draws.shape[1] < 1000
    np.testing.assert_array_equal(posterior_draws(interrupted, "twice"), 2 * draws)
    # the kept draws of each chain, in order: an uninterrupted run's first ones
    uninterrupted = posterior_draws(run(calls=10**9), "x")
    np.testing.assert_array_equal(draws, uninterrupted[:, : draws.shape[1]])


def test_ctrl_c_during_tuning_is_an_interrupt():
    with interrupted_normal(calls=50), pytest.raises(KeyboardInterrupt):
        pymc_rnshmc.sample(draws=100, tune=300, chains=2, random_seed=2, progressbar=False)
