"""RNSHMC's default pipeline: an early start, learning from the tuning draws, a frozen surrogate."""

import copy

import numpy as np
import pytest
from pymc.step_methods.step_sizes import DualAverageAdaptation

from pymc_rnshmc import RNSHMC, SurrogateWarning
from pymc_rnshmc.step_methods.collapse_watch import COLLAPSE_WINDOW
from pymc_rnshmc.step_methods.reporting import ALONE_PHASE
from pymc_rnshmc.step_methods.schedule import RNSHMC_SCHEDULE, ExplorationSchedule, Phase
from pymc_rnshmc.step_methods.tuning_alone import FINAL_EXACT_DRAWS
from tests.checks import TUNE_KNOWN, sample_stat
from tests.models import correlated_normal
from tests.step_methods.helpers import (
    DistortedSurrogate,
    assert_correlated_normal,
    sample_with,
    start_chain,
)

EXPLORATION = 40


def run(tune: int, draws: int, seed: int, chains: int = 1, **options):
    """RNSHMC on the correlated normal, starting after ``EXPLORATION`` draws whatever the fit.

    Without the safety net unless ``options`` say otherwise: these tests follow what the
    surrogate draws of tuning learn, and the net's exact NUTS draws would come between them.
    """
    options.setdefault("safety_net", 0.0)
    return sample_with(
        RNSHMC,
        correlated_normal(),
        tune=tune,
        draws=draws,
        chains=chains,
        seed=seed,
        keep_tuning=True,
        exploration_steps=EXPLORATION,
        start_error=None,
        **options,
    )


@pytest.fixture(scope="module")
def learning_run():
    return run(tune=600, draws=1500, seed=11, chains=2)


def warmup_stat(idata, name: str) -> np.ndarray:
    return np.asarray(idata.warmup_sample_stats[name].values)


def test_the_learning_chain_is_exact(learning_run):
    idata, _ = learning_run
    assert_correlated_normal(idata, "learning RNSHMC")


def test_tuning_surrogate_draws_pay_for_the_gradients_they_learn_from(learning_run):
    idata, _ = learning_run
    surrogate = warmup_stat(idata, "used_surrogate")
    gradients = warmup_stat(idata, "n_gradient_evals")
    assert not surrogate[:, :EXPLORATION].any()
    assert surrogate[:, EXPLORATION:].all()
    # one exact gradient per proposal while learning (and a few at the trust region's edge)
    assert np.all(gradients[:, EXPLORATION : EXPLORATION + 40] >= 1)
    assert np.all(sample_stat(idata, "n_gradient_evals") == 0), "no exact gradient after tuning"


def test_refits_grow_the_training_set_beyond_the_exploration(learning_run):
    _, step = learning_run
    assert step.surrogate.report.n_points > EXPLORATION
    assert step.setup_seconds > 0


def test_the_surrogate_is_frozen_after_tuning():
    model = correlated_normal()
    with model:
        step = RNSHMC(exploration_steps=EXPLORATION, start_error=None, weigh_costs=False)
    start_chain(step, seed=4, tune=300, draws=50)
    point = model.initial_point()
    for _ in range(300):
        point, _ = step.step(point)
    step.stop_tuning()
    step.tune = False
    frozen = step.surrogate
    for _ in range(50):
        point, _ = step.step(point)
    assert step.phase == Phase.SURROGATE
    assert step.surrogate is frozen
    assert not step._warmup.plan.learning


def test_without_refits_the_first_fit_is_kept():
    idata, step = run(tune=300, draws=20, seed=3, refit_during_tuning=False)
    assert step.surrogate.report.n_points <= EXPLORATION
    assert np.all(warmup_stat(idata, "n_gradient_evals")[:, EXPLORATION:] == 0)


def test_learning_stops_once_a_good_fit_stagnates():
    schedule = RNSHMC_SCHEDULE
    assert schedule.keeps_learning(100, 0.05, None, 1000), "the first fit is always refitted"
    assert schedule.keeps_learning(200, 0.04, 0.05, 1000), "improving"
    assert not schedule.keeps_learning(200, 0.049, 0.05, 1000), "good and stagnating"
    assert schedule.keeps_learning(200, 0.3, 0.25, 1000), "stagnating but still poor"
    assert not schedule.keeps_learning(200, 0.009, 0.05, 1000), "nothing left to learn"
    assert schedule.keeps_learning(100, 0.005, None, 1000), "but the first fit is refitted"
    assert schedule.keeps_learning(200, np.nan, np.nan, 1000), "refits that report no error"


def test_learning_stops_when_no_refit_could_be_adapted_before_tuning_ends():
    schedule = RNSHMC_SCHEDULE
    # a refit comes after 100 more recorded proposals (the first after 50, if it must), and
    # needs 100 draws to adapt after it
    assert schedule.keeps_learning(100, 0.3, None, 150)
    assert not schedule.keeps_learning(100, 0.3, None, 149)
    assert schedule.keeps_learning(200, 0.3, 0.4, 300)
    assert not schedule.keeps_learning(200, 0.3, 0.4, 299)
    assert schedule.keeps_learning(100, 0.3, None, None), "unknown tuning length: keep on"
    # pooled chains add a point each a draw: 4 chains bring the 50 points in 13 draws
    assert schedule.keeps_learning(100, 0.3, None, 113, chains=4)
    assert not schedule.keeps_learning(100, 0.3, None, 112, chains=4)


def test_a_schedule_that_does_not_learn_never_refits():
    assert not ExplorationSchedule().keeps_learning(100, 0.5, None, 10_000)


def test_a_surrogate_whose_proposals_are_all_rejected_hands_tuning_back_to_exact_nuts():
    idata, _ = run(tune=400, draws=50, seed=5, surrogate=DistortedSurrogate("shifted", 10.0))
    used = warmup_stat(idata, "used_surrogate")[0]
    assert not used[:EXPLORATION].any() and used[EXPLORATION : EXPLORATION + COLLAPSE_WINDOW].all()
    assert not used[EXPLORATION + COLLAPSE_WINDOW], "exact NUTS again after the collapse"
    assert used[EXPLORATION + COLLAPSE_WINDOW :].any(), "and a later start"


def test_a_collapse_too_late_for_another_fit_leaves_the_rest_to_exact_nuts():
    with pytest.warns(SurrogateWarning, match="too late to fit another"):
        idata, step = run(
            tune=300, draws=400, seed=5, surrogate=DistortedSurrogate("shifted", 10.0)
        )
    assert step.phase == Phase.EXACT
    assert not sample_stat(idata, "used_surrogate").any()
    assert_correlated_normal(idata, "after the fallback", min_ess=20, correlation=False)


def test_exact_nuts_resuming_while_tuning_adapts_its_step_size_afresh_if_tuning_remains():
    # on Neal's funnel, chains that resumed with exploration's 575-draw-old adaptation at draw
    # 625 ended tuning stuck in the neck (970 divergences of 1000 draws)
    with correlated_normal():
        step = RNSHMC()
    start_chain(step, seed=1, tune=1000, draws=100)
    nuts = step._explorer.nuts  # exploration's NUTS (surrogate draws adapt their own)
    explored = nuts.step_adapt
    for accept in np.linspace(0.3, 1.0, 500):
        explored.update(accept, True)
    accepts = np.linspace(0.0, 1.0, 40)

    def step_sizes(adaptation) -> list[float]:
        for accept in accepts:
            adaptation.update(accept, True)
        return [adaptation.current(True), adaptation.current(False)]

    step._explorer.resume(tuning_draws_left=400)
    resumed = nuts.step_adapt
    new = DualAverageAdaptation(explored.current(False), nuts.target_accept, 0.05, 0.75, 10)
    assert step_sizes(resumed) == step_sizes(new)
    nuts.step_adapt = explored
    step._explorer.resume(tuning_draws_left=50)  # too few to adapt afresh
    kept = nuts.step_adapt
    assert kept is not explored
    assert step_sizes(kept) == step_sizes(copy.deepcopy(explored))
    step._explorer.resume(tuning_draws_left=None)  # PyMC 5 does not say: afresh
    assert nuts.step_adapt is not kept


# ----------------------------------------------------------------- tuning on the surrogate alone
def test_after_learning_tuning_moves_on_the_surrogate_alone_and_checks_it(learning_run):
    idata, _ = learning_run
    phase, logps = warmup_stat(idata, "phase"), warmup_stat(idata, "n_logp_evals")
    alone = phase == ALONE_PHASE
    if not TUNE_KNOWN:
        assert not alone.any(), "PyMC 5 does not tell the step when tuning ends: no stretch"
        return
    assert alone.sum() > 100, "most post-learning tuning draws move on the surrogate alone"
    assert np.all(logps[alone] == 0), "a draw on the surrogate alone asks the model nothing"
    for chain in range(phase.shape[0]):
        last_alone = np.flatnonzero(alone[chain]).max()
        assert last_alone < phase.shape[1] - FINAL_EXACT_DRAWS  # the last draws are exact
        assert np.all(phase[chain, last_alone + 1 :] != ALONE_PHASE)
        checks = np.flatnonzero(alone[chain, :-1] & ~alone[chain, 1:])  # the draw after a run
        assert np.all(phase[chain, checks[:-1] + 1] == 1), "every run ends with a check draw"
    kept_logps = sample_stat(idata, "n_logp_evals")
    assert np.median(kept_logps) == 1, "kept draws are unchanged: one exact logp each"


@pytest.mark.skipif(not TUNE_KNOWN, reason="PyMC 5 does not tell the step when tuning ends")
def test_a_wrong_surrogate_ends_tuning_alone_and_the_draws_stay_exact():
    idata, step = run(
        tune=600,
        draws=12_000,
        seed=12,
        surrogate=DistortedSurrogate("shifted", 1.5),
        refit_during_tuning=False,
        # exploring from PyMC's start, the chain is still off the shifted surrogate's mass when
        # the stretch begins, so the error drifts. From the mode (the default), the stretch
        # began where the error had already settled, and nothing drifted: the drift check sees
        # a change of the error along the stretch, not an error that is the same everywhere.
        explore_from_mode=False,
    )
    assert step._chain.warmup.alone.ended, "the checks saw the surrogate's error drift"
    phase = warmup_stat(idata, "phase")[0]
    assert 0 < (phase == ALONE_PHASE).sum() < 100, "it ended early"
    # the shifted surrogate mixes slowly (exact acceptance about 0.1): 1500 draws gave a bulk
    # ESS of 3-26 depending on the path length chosen, 12 000 (3 s) give 43-45
    assert_correlated_normal(idata, "RNSHMC tuned on a shifted surrogate", min_ess=25)
