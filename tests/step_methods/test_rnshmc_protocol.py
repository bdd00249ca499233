"""RNSHMC follows PyMC's step-method protocol: stats, state, seeds, processes, pickling."""

import pickle

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.compound import Competence

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from tests.checks import posterior_draws, sample_stat
from tests.models import independent_normal
from tests.step_methods.helpers import start_chain

TUNE, DRAWS, EXPLORATION = 300, 200, 200


def sample(model, **kwargs):
    options = {
        "tune": TUNE,
        "draws": DRAWS,
        "chains": 2,
        "cores": 1,
        "random_seed": 11,
        "progressbar": False,
        "compute_convergence_checks": False,
    }
    options.update(kwargs)
    with model:
        step = RNSHMC(exploration_steps=EXPLORATION)
        return pm.sample(step=step, **options)


@pytest.fixture(scope="module")
def model():
    return independent_normal()


@pytest.fixture(scope="module")
def sequential_run(model):
    return sample(model, discard_tuned_samples=False)


def test_returns_what_pm_sample_returns_with_declared_stats(sequential_run):
    idata = sequential_run
    assert {"posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"} <= set(
        idata.groups() if callable(getattr(idata, "groups", None)) else idata.children
    )
    stats = idata.sample_stats
    expected = {"lp" if k == "model_logp" else k for k in SURROGATE_HMC_STATS} - {"warning"}
    assert expected <= set(stats.data_vars)
    for name in expected:
        declared = SURROGATE_HMC_STATS["model_logp" if name == "lp" else name][0]
        assert np.dtype(stats[name].dtype) == np.dtype(declared), name
    assert posterior_draws(idata, "x").shape == (2, DRAWS, 3)


def test_draws_after_tuning_cost_one_logp_and_no_gradient(sequential_run):
    idata = sequential_run
    assert sample_stat(idata, "used_surrogate").all()
    assert (sample_stat(idata, "n_gradient_evals") == 0).all()
    assert (sample_stat(idata, "n_logp_evals") == 1).all()
    assert (sample_stat(idata, "tree_depth") == 0).all()
    accept = sample_stat(idata, "accept")
    assert 0.5 < accept.mean() <= 1.0
    assert np.isfinite(sample_stat(idata, "surrogate_error")).all()


def test_each_sequential_chain_explores_and_fits_its_own_surrogate(sequential_run):
    warmup = sequential_run.warmup_sample_stats
    used = np.asarray(warmup["used_surrogate"].values)
    gradients = np.asarray(warmup["n_gradient_evals"].values)
    for chain in range(2):
        assert not used[chain, :EXPLORATION].any(), "a chain started from another's surrogate"
        assert (gradients[chain, :EXPLORATION] > 0).all()
        assert used[chain, EXPLORATION:].all()


def test_same_seed_same_draws_sequential_and_parallel(model, sequential_run):
    reference = posterior_draws(sequential_run, "x")
    again = posterior_draws(sample(model, discard_tuned_samples=False), "x")
    np.testing.assert_array_equal(again, reference)
    parallel = posterior_draws(sample(model, cores=2), "x")
    np.testing.assert_array_equal(parallel, reference)
    assert not np.array_equal(reference[0], reference[1])


def test_spawned_workers_sample_the_same_chains(model, sequential_run):
    reference = posterior_draws(sequential_run, "x")
    spawned = posterior_draws(sample(model, cores=2, mp_ctx="spawn"), "x")
    np.testing.assert_array_equal(spawned, reference)


def test_other_seed_other_draws(model, sequential_run):
    other = posterior_draws(sample(model, random_seed=12), "x")
    assert not np.array_equal(other, posterior_draws(sequential_run, "x"))


@pytest.mark.parametrize("phase_draws", [5, EXPLORATION + 5], ids=["exploration", "surrogate"])
def test_sampling_state_round_trip_reproduces_the_next_step(model, phase_draws):
    with model:
        step = RNSHMC(exploration_steps=EXPLORATION)
    start_chain(step, seed=3, tune=TUNE, draws=DRAWS)
    point = model.initial_point()
    for _ in range(phase_draws):
        point, _ = step.step(point)
    assert step.phase == ("exploration" if phase_draws < EXPLORATION else "surrogate")
    state = step.sampling_state
    first_point, first_stats = step.step(point)
    step.sampling_state = state
    second_point, second_stats = step.step(point)
    for name in first_point:
        np.testing.assert_array_equal(first_point[name], second_point[name])
    for key in ("accept", "n_steps", "step_size", "model_logp"):
        assert first_stats[0][key] == second_stats[0][key]


def test_pickles_and_samples_after_unpickling(model):
    # PyMC ships steps to spawned workers with cloudpickle (its own NUTS needs it too); the
    # worker then drives step() directly, as here.
    with model:
        step = RNSHMC(exploration_steps=50)
    clone = pickle.loads(cloudpickle.dumps(pickle.loads(cloudpickle.dumps(step))))
    start_chain(clone, seed=5, tune=80, draws=20)
    point = model.initial_point()
    for draw in range(100):
        if draw == 80:
            clone.stop_tuning()
        point, stats = clone.step(point)
    assert stats[0]["used_surrogate"] and stats[0]["n_gradient_evals"] == 0
    assert np.all(np.isfinite(point["x"]))


def test_competence_is_compatible_but_never_preferred(model):
    continuous = model["x"]
    assert RNSHMC.competence(continuous, True) == Competence.COMPATIBLE
    assert RNSHMC.competence(continuous, False) == Competence.INCOMPATIBLE
    with pm.Model():
        coin = pm.Bernoulli("coin", 0.5)
    assert RNSHMC.competence(coin, False) == Competence.INCOMPATIBLE


def test_progress_bar_runs(model):
    with model:
        pm.sample(
            step=RNSHMC(exploration_steps=30),
            tune=40,
            draws=10,
            chains=1,
            progressbar=True,
            random_seed=2,
            compute_convergence_checks=False,
        )


def test_random_variables_are_accepted_as_vars_and_ordered_like_the_model():
    with pm.Model() as model:
        first = pm.Normal("first", 0.0, 1.0, shape=3)
        second = pm.Normal("second", 5.0, 0.1, shape=2)
        step = RNSHMC(vars=[second, first], exploration_steps=100)
        idata = pm.sample(
            step=step,
            tune=200,
            draws=200,
            chains=1,
            random_seed=4,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert [v.name for v in step.vars] == ["first", "second"]
    assert abs(posterior_draws(idata, "second").mean() - 5.0) < 0.05
    assert abs(posterior_draws(idata, "first").mean()) < 0.3
    assert model is not None
