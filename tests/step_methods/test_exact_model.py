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


def shifted_model() -> pm.Model:
    with pm.Model() as model:
        shift = pm.Normal("shift")
        pm.Normal("x", mu=shift, sigma=1.0)
    return model


def shifted_logp(x: float, shift: float) -> float:
    """x about shift, and shift's own prior term."""
    return -0.5 * (x - shift) ** 2 - 0.5 * shift**2 - np.log(2 * np.pi)


@pytest.mark.parametrize("pickled", [False, True])
def test_a_model_with_variables_the_step_does_not_sample_waits_too_and_follows_them(pickled):
    # Built at its first call, the function starts from the non-sampled values set before
    # it (held by the joint function's shared variables) and is set with them after.
    model = shifted_model()
    exact = ExactModel(model, [model.rvs_to_values[model["x"]]])
    exact.set_extra_values({"shift": np.array(2.0)})
    if pickled:
        exact = pickle.loads(cloudpickle.dumps(exact))
    before = exact.extra_values()
    assert not logp_only(exact).built
    assert exact.logp(np.array([1.5])) == pytest.approx(shifted_logp(1.5, 2.0))
    assert logp_only(exact).built and exact.extras_unchanged(before)
    exact.set_extra_values({"shift": np.array(-1.0)})
    assert not exact.extras_unchanged(before)
    assert exact.logp(np.array([1.5])) == pytest.approx(shifted_logp(1.5, -1.0))
    potential, _ = exact.potential_and_gradient(np.array([1.5]))
    assert -potential == pytest.approx(shifted_logp(1.5, -1.0))
