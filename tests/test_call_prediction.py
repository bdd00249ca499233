"""predict_call: a run's counted evaluations priced at another model cost."""

import dataclasses

import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc import RNSHMC, EvaluationCost, predict_call
from pymc_rnshmc.comparison import CallPrediction, comparison_table, run_sampler
from tests.models import independent_normal

MEASURED = EvaluationCost(logp=2e-7, logp_and_gradient=3e-7)
"""A cost the runs are said to have been made at (the arithmetic does not depend on it, but it
must not exceed what the runs took: a few tenths of a microsecond, below any real evaluation)."""


@pytest.fixture(scope="module")
def runs():
    # costs not weighed: the chain does not depend on the machine's timings
    options = {"tune": 300, "draws": 200, "chains": 2, "random_seed": 5, "progressbar": False}
    with independent_normal():
        return {
            "NUTS": run_sampler("pymc", **options),
            "RNSHMC": run_sampler(lambda: RNSHMC(weigh_costs=False), **options),
        }


def total_evaluations(run) -> tuple[float, float]:
    stats = run.trace.sample_stats
    if "n_logp_evals" in stats:
        kept = (float(stats["n_logp_evals"].sum()), float(stats["n_gradient_evals"].sum()))
    else:
        kept = (float((stats["n_steps"] + 1).sum()),) * 2
    return kept[0] + run.tuning_evaluations[0], kept[1] + run.tuning_evaluations[1]


@pytest.mark.parametrize("name", ["NUTS", "RNSHMC"])
def test_at_the_measured_cost_the_prediction_is_the_run(runs, name):
    run = runs[name]
    same = predict_call(run, MEASURED, MEASURED)
    assert same.whole_call_seconds == pytest.approx(run.whole_call_seconds, rel=1e-12)
    table = comparison_table({name: run}).loc[name]
    assert same.seconds_to_ess_1000 == pytest.approx(table["s to ESS 1000"], rel=1e-12)
    assert same.sampler_seconds + same.evaluation_seconds == pytest.approx(
        run.whole_call_seconds, rel=1e-12
    )


@pytest.mark.parametrize("name", ["NUTS", "RNSHMC"])
def test_a_slower_solve_adds_its_seconds_to_every_evaluation(runs, name):
    run = runs[name]
    logps, gradients = total_evaluations(run)
    slower = predict_call(run, MEASURED.slower_by(0.01), MEASURED)
    assert slower.whole_call_seconds == pytest.approx(run.whole_call_seconds + 0.01 * logps)
    assert slower.sampler_seconds == predict_call(run, MEASURED, MEASURED).sampler_seconds
    # pricier gradients cost only the evaluations that came with one
    pricier = dataclasses.replace(MEASURED, logp_and_gradient=MEASURED.logp_and_gradient + 0.01)
    predicted = predict_call(run, pricier, MEASURED)
    assert predicted.whole_call_seconds == pytest.approx(run.whole_call_seconds + 0.01 * gradients)


def test_logps_without_a_gradient_are_priced_at_a_logp_and_the_others_as_joint(runs):
    cost = EvaluationCost(logp=0.01, logp_and_gradient=0.02)
    to_ess = {}
    for name, run in runs.items():
        logps, gradients = total_evaluations(run)
        predicted = predict_call(run, cost, MEASURED)
        assert isinstance(predicted, CallPrediction)
        assert predicted.evaluation_seconds == pytest.approx(
            0.01 * (logps - gradients) + 0.02 * gradients
        )
        to_ess[name] = predicted.seconds_to_ess_1000
    assert total_evaluations(runs["NUTS"])[0] == total_evaluations(runs["NUTS"])[1]
    assert to_ess["RNSHMC"] < to_ess["NUTS"]  # at 10 ms a logp the surrogate's draws win


def test_a_cost_above_what_the_run_took_is_refused(runs):
    run = runs["NUTS"]
    logps, _ = total_evaluations(run)
    overstated = EvaluationCost(1.0, 2.0 * run.whole_call_seconds / logps)
    with pytest.raises(ValueError, match="less time than its counted evaluations"):
        predict_call(run, MEASURED, overstated)


def test_a_run_without_counts_is_refused_with_what_to_do():
    with independent_normal():
        run = run_sampler(
            pm.Metropolis, tune=50, draws=50, chains=1, random_seed=1, progressbar=False
        )
    with pytest.raises(ValueError, match="no count of its exact evaluations"):
        predict_call(run, MEASURED, MEASURED)


def test_a_run_without_tuning_draws_is_predicted_with_none_counted():
    options = {"tune": 0, "draws": 100, "chains": 1, "random_seed": 2, "progressbar": False}
    with independent_normal():
        run = run_sampler("pymc", **options)
    assert run.tuning_evaluations == (0.0, 0.0)
    prediction = predict_call(run, MEASURED.slower_by(1e-3), MEASURED)
    kept = float((run.trace.sample_stats["n_steps"] + 1).sum())
    expected = run.whole_call_seconds + 1e-3 * kept
    assert prediction.whole_call_seconds == pytest.approx(expected)
    assert np.isfinite(comparison_table({"NUTS": run}).loc["NUTS", "logps to ESS 1000"])


def test_numpy_numbers_are_costs_and_booleans_are_not():
    assert EvaluationCost(np.float32(1e-3), np.int64(1)).logp_and_gradient == 1
    with pytest.raises(ValueError, match="finite number >= 0"):
        EvaluationCost(True, 1.0)


@pytest.mark.parametrize("value", [-1.0, np.nan, np.inf, "1"])
def test_an_evaluation_cost_is_a_finite_non_negative_number(value):
    with pytest.raises(ValueError, match="finite number >= 0"):
        EvaluationCost(logp=value, logp_and_gradient=1.0)
    with pytest.raises(ValueError, match="finite number >= 0"):
        EvaluationCost(logp=1.0, logp_and_gradient=value)


def test_a_models_cost_is_timed_on_its_compiled_functions():
    with independent_normal() as model:
        cost = EvaluationCost.of_model(repeats=5)
    assert 0 < cost.logp < 1 and 0 < cost.logp_and_gradient < 1
    at = {name: np.ones(3) for name in model.initial_point()}
    assert EvaluationCost.of_model(model, point=at, repeats=1).logp > 0


def test_a_model_without_a_gradient_costs_its_logp_for_both():
    cost = EvaluationCost.of_model(independent_normal(gradient=False), repeats=3)
    assert cost.logp > 0 and cost.logp_and_gradient == cost.logp


def test_each_timed_call_is_at_a_point_of_its_own(monkeypatch):
    from pymc_rnshmc.step_methods.exact_model import ExactModel

    seen = []
    original = ExactModel.logp

    def recording(self, position):
        seen.append(np.array(position))
        return original(self, position)

    monkeypatch.setattr(ExactModel, "logp", recording)
    EvaluationCost.of_model(independent_normal(), repeats=4)
    assert len(seen) == 5  # one untimed first call, then the timed ones
    assert len({position.tobytes() for position in seen}) == 5
