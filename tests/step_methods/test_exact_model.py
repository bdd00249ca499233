"""The exact model's logp-only function: built at its first call, once for all copies."""

from __future__ import annotations

import pickle

import cloudpickle
import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc.step_methods.exact_model import BuiltAtFirstCall, ExactModel


def normal_model() -> pm.Model:
    with pm.Model() as model:
        pm.Normal("x", mu=[1.0, -1.0], sigma=[0.5, 2.0])
    return model


def exact_logp(position: np.ndarray) -> float:
    sigma = np.array([0.5, 2.0])
    z = (position - np.array([1.0, -1.0])) / sigma
    return float(np.sum(-0.5 * z**2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)))


def logp_only(exact: ExactModel) -> BuiltAtFirstCall:
    function = exact._compiled[0]
    assert isinstance(function, BuiltAtFirstCall)
    return function


def test_the_logp_only_function_is_built_at_its_first_call_and_shared_by_copies():
    model = normal_model()
    exact = ExactModel(model, model.value_vars)
    other = exact.for_another_chain()
    assert not logp_only(exact).built
    position = np.array([0.3, 0.7])
    assert exact.potential_and_gradient(position)[0] == pytest.approx(-exact_logp(position))
    assert not logp_only(exact).built  # the joint function does not need it
    assert exact.logp(position) == pytest.approx(exact_logp(position))
    assert logp_only(exact).built and logp_only(other).built  # one function for both copies


def test_a_chain_that_takes_logp_from_the_joint_function_never_builds_it():
    model = normal_model()
    exact = ExactModel(model, model.value_vars)
    exact.logp_by_joint = True
    assert exact.logp(np.array([0.3, 0.7])) == pytest.approx(exact_logp(np.array([0.3, 0.7])))
    assert not logp_only(exact).built


@pytest.mark.parametrize("built", [False, True])
def test_an_exact_model_pickles_before_and_after_the_build(built):
    model = normal_model()
    exact = ExactModel(model, model.value_vars)
    position = np.array([-0.4, 2.5])
    if built:
        exact.logp(position)
    copied = pickle.loads(cloudpickle.dumps(exact))
    assert logp_only(copied).built == built
    assert copied.logp(position) == pytest.approx(exact_logp(position))


def test_a_model_with_variables_the_step_does_not_sample_builds_it_at_once():
    with pm.Model() as model:
        shift = pm.Normal("shift")
        pm.Normal("x", mu=shift, sigma=1.0)
    x = model.rvs_to_values[model["x"]]
    exact = ExactModel(model, [x])
    assert not isinstance(exact._compiled[0], BuiltAtFirstCall)
    exact.set_extra_values({"shift": np.array(2.0)})
    # x = 1.5 about shift = 2, and shift's own prior term at 2
    expected = -0.5 * 0.25 - 0.5 * 4.0 - np.log(2 * np.pi)
    assert exact.logp(np.array([1.5])) == pytest.approx(expected)
