"""``sample``'s default evaluator: local worker processes where the model's cost pays for them."""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import time

import numpy as np
import pytest

import pymc_rnshmc
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.step_methods.evaluators import (
    _WORKER_SAMPLER,
    InProcessEvaluator,
    ProcessEvaluator,
    _evaluate_in_worker,
    _install,
    pickled_for_workers,
)
from pymc_rnshmc.step_methods.local_evaluator import (
    START_SECONDS,
    LocalEvaluator,
    choose,
    workers_pay,
)
from pymc_rnshmc.workloads import sleeping_normal
from tests.checks import posterior_draws
from tests.models import correlated_normal


def test_workers_pay_for_a_costly_model_and_not_for_a_cheap_one():
    fork = START_SECONDS["fork"]
    assert workers_pay(0.005, workers=2, evaluations=8000, start_seconds=fork)
    assert not workers_pay(1e-4, workers=2, evaluations=8000, start_seconds=fork)
    # a long compilation in each worker is paid back only by a long run
    assert not workers_pay(0.005, workers=2, evaluations=1000, start_seconds=fork + 10)
    assert workers_pay(0.005, workers=2, evaluations=100_000, start_seconds=fork + 10)
    # one worker saves nothing, and a cost not measured is no reason to start any
    assert not workers_pay(10.0, workers=1, evaluations=8000, start_seconds=fork)
    assert not workers_pay(float("nan"), workers=4, evaluations=8000, start_seconds=fork)


def test_the_saving_must_be_twice_what_the_workers_add():
    # 1000 calls of 10 ms on 2 workers save 5 s; the trips cost 0.5 s, and the start 1.5 or 2.1 s
    assert workers_pay(0.01, 2, 1000, start_seconds=1.5, round_trip=5e-4)
    assert not workers_pay(0.01, 2, 1000, start_seconds=2.1, round_trip=5e-4)


class TimedModel:
    """What ``choose`` reads of an exact model: a call that takes ``seconds`` (``first``: the
    first, which compiles), or raises."""

    has_gradient = True
    initial_position = np.zeros(2)

    def __init__(self, seconds: float, first: float | None = None, error=None) -> None:
        self.seconds, self.first, self.error = seconds, first, error
        self.calls = 0

    def for_another_chain(self):
        return self

    def evaluate(self, position, gradient):
        if self.error is not None:
            raise self.error
        self.calls += 1
        time.sleep(self.first if self.calls == 1 and self.first is not None else self.seconds)


def test_the_choice_weighs_the_measured_cost_and_compilation():
    costly = choose(TimedModel(0.01), workers=2, evaluations=10_000, context="fork")
    assert costly.workers == 2 and "costs 10" in costly.reason
    # a margin for a loaded machine: pays only if a sleep of 10 ms measured 15 ms or more
    compiling = choose(TimedModel(0.01, first=1.0), workers=2, evaluations=600, context="fork")
    assert compiling.workers == 1 and "too little for 2 worker processes" in compiling.reason
    # with spawn the workers take longer to start: the same run does not pay for them
    spawned = choose(TimedModel(0.01), workers=2, evaluations=1500, context="spawn")
    forked = choose(TimedModel(0.01), workers=2, evaluations=1500, context="fork")
    assert (spawned.workers, forked.workers) == (1, 2)


def test_one_core_or_a_failing_model_keeps_the_work_here():
    model = TimedModel(0.01)
    kept = choose(model, workers=1, evaluations=10**6, context="fork")
    assert kept.workers == 1 and "cores=1" in kept.reason
    assert model.calls == 0  # nothing measured
    failing = choose(TimedModel(0.01, error=RuntimeError("no")), 4, 10**6, "fork")
    assert failing.workers == 1 and "failed at its initial point (RuntimeError)" in failing.reason


def test_in_this_process_the_evaluator_does_not_stream():
    evaluator = LocalEvaluator(workers=1, evaluations=10)
    assert not hasattr(evaluator, "first_done")
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        LocalEvaluator(workers=0, evaluations=10)


def test_a_costly_model_goes_to_the_workers_with_the_same_draws(caplog):
    model = sleeping_normal(dim=2, seconds=0.003)

    def run(**where):
        with model:
            return pymc_rnshmc.sample(
                draws=40,
                tune=120,
                chains=2,
                step=RNSHMC(weigh_costs=False),
                random_seed=4,
                progressbar=False,
                compute_convergence_checks=False,
                **where,
            )

    evaluator = LocalEvaluator(workers=2, evaluations=10**7)  # as if the run were long
    with caplog.at_level(logging.INFO, logger="pymc"):
        on_workers = run(evaluator=evaluator)
    evaluator.close()
    assert evaluator.choice.workers == 2 and hasattr(evaluator, "first_done")
    assert "Exact evaluations in 2 worker processes: an exact evaluation costs" in caplog.text
    here = run(cores=1)
    np.testing.assert_array_equal(posterior_draws(on_workers, "x"), posterior_draws(here, "x"))


def test_sample_keeps_a_cheap_model_in_this_process_and_says_why(caplog):
    with correlated_normal() as model:
        pass
    with caplog.at_level(logging.INFO, logger="pymc"):
        pymc_rnshmc.sample(
            draws=20, tune=100, chains=2, cores=2, model=model, random_seed=1, progressbar=False
        )
    assert "Exact evaluations in this process: an exact evaluation costs" in caplog.text
    assert "too little for 2 worker processes to pay" in caplog.text


@pytest.mark.parametrize(
    "settings, match",
    [
        ({"cores": 0}, "cores must be a positive integer"),
        ({"cores": 2, "evaluator": LocalEvaluator(2, 10)}, "either an evaluator or cores"),
        ({"mp_ctx": "spawn", "evaluator": LocalEvaluator(2, 10)}, "either an evaluator or"),
    ],
)
def test_sample_refuses_unclear_settings(settings, match):
    with correlated_normal() as model:
        pass
    with pytest.raises(ValueError, match=match):
        pymc_rnshmc.sample(draws=10, tune=10, chains=2, model=model, **settings)


class Sampler:
    """What ``LocalEvaluator.start`` reads of a sampler: its exact model."""

    def __init__(self, exact_model) -> None:
        self.exact_model = exact_model


def test_workers_that_cannot_load_the_model_leave_the_work_here(monkeypatch, caplog):
    def refuse(self, sampler):
        raise pickle.PicklingError("cannot pickle '_thread.lock' object")

    monkeypatch.setattr(ProcessEvaluator, "start", refuse)
    evaluator = LocalEvaluator(workers=2, evaluations=10**6, context="fork")
    with caplog.at_level(logging.INFO, logger="pymc"):
        evaluator.start(Sampler(TimedModel(0.01)))
    assert evaluator.choice.workers == 1 and not hasattr(evaluator, "first_done")
    assert "Exact evaluations in this process: the worker processes could not load" in caplog.text
    assert "_thread.lock" in caplog.text


def test_a_worker_evaluates_logp_with_the_chains_function():
    with correlated_normal():
        sampler = RNSHMC()
    token = "test-by-joint"
    _install(token, pickled_for_workers(sampler))
    try:
        position = sampler.exact_model.initial_position
        for by_joint in (True, False):
            evaluation, _ = _evaluate_in_worker(token, position, False, by_joint)
            assert _WORKER_SAMPLER[token][0].exact_model.logp_by_joint is by_joint
            assert evaluation.logp == sampler.exact_model.logp(position)
    finally:
        del _WORKER_SAMPLER[token]


def test_sample_takes_pm_samples_forms_of_chains_cores_and_mp_ctx():
    with correlated_normal() as model:
        # costs not weighed: the two calls below must draw the same chains, which a choice on
        # measured seconds (the setup's budget) could make differ
        steps = [RNSHMC(weigh_costs=False) for _ in range(2)]
    options = {"draws": 20, "tune": 60, "model": model, "progressbar": False}
    spawn = multiprocessing.get_context("spawn")
    idata = pymc_rnshmc.sample(
        chains=None, cores=1, mp_ctx=spawn, random_seed=1, step=steps[0], **options
    )
    assert posterior_draws(idata, "x").shape[0] == 2  # PyMC's max(2, cores)
    # cores=1 beside an evaluator, as sample() once required, is still taken
    again = pymc_rnshmc.sample(
        chains=2, cores=1, evaluator=InProcessEvaluator(), random_seed=1, step=steps[1], **options
    )
    np.testing.assert_array_equal(posterior_draws(again, "x"), posterior_draws(idata, "x"))
