"""ARNSHMC: exact with a surrogate that keeps changing, its refresh schedule, its protocol."""

import pickle

import cloudpickle
import numpy as np
import pytest

from pymc_rnshmc import ARNSHMC, SurrogateWarning
from pymc_rnshmc.hmc.force_field import ForceField
from pymc_rnshmc.hmc.kernel import start_point
from pymc_rnshmc.step_methods.arnshmc import refresh_probability
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import (
    NORMAL_MEAN,
    NORMAL_SD,
    correlated_normal,
    independent_normal,
)
from tests.step_methods.helpers import (
    DistortedSurrogate,
    assert_correlated_normal,
    sample_with,
    start_chain,
)

EXPLORATION = 60


def run(model, tune=500, draws=1500, chains=2, seed=30, cores=1, **step_options):
    step_options.setdefault("exploration_steps", EXPLORATION)
    idata, _ = sample_with(
        ARNSHMC,
        model,
        tune=tune,
        draws=draws,
        chains=chains,
        seed=seed,
        cores=cores,
        keep_tuning=True,
        **step_options,
    )
    return idata


def in_surrogate_phase(seed: int, tune: int = 200):
    """A model and an ARNSHMC step five draws into its surrogate phase, refreshing every draw."""
    model = independent_normal()
    with model:
        step = ARNSHMC(exploration_steps=EXPLORATION, refresh_scale=1e9)
    start_chain(step, seed=seed, tune=tune, draws=10)
    point = model.initial_point()
    for _ in range(EXPLORATION + 5):
        point, _ = step.step(point)
    return step, point


def refreshes_after_tuning(idata) -> np.ndarray:
    """Surrogate changes during the draws kept, per chain."""
    refreshes = sample_stat(idata, "surrogate_refreshes")
    before = np.asarray(idata.warmup_sample_stats["surrogate_refreshes"].values)[:, -1]
    return refreshes[:, -1] - before


@pytest.fixture(scope="module")
def correlated_run():
    # without the safety net, whose exact NUTS draws are not surrogate draws: these tests
    # count what each surrogate draw learns
    return run(correlated_normal(), safety_net=0.0)


def test_correlated_normal_is_exact_while_the_surrogate_keeps_changing(correlated_run):
    idata = correlated_run
    assert sample_stat(idata, "used_surrogate").all()
    assert (refreshes_after_tuning(idata) >= 5).all()
    assert_correlated_normal(idata)


def test_surrogate_starts_early_and_learns_from_every_exact_evaluation(correlated_run):
    warmup = correlated_run.warmup_sample_stats
    used = np.asarray(warmup["used_surrogate"].values)
    assert not used[:, :EXPLORATION].any() and used[:, EXPLORATION:].all()
    # after tuning, one new point per draw (the end point's logp), unless the proposal was
    # too implausible to learn from
    points = sample_stat(correlated_run, "estimator_points")
    steps = np.diff(points, axis=1)
    assert set(np.unique(steps)) <= {0, 1} and np.mean(steps == 1) > 0.95
    # during tuning too, except at batch refits, which start afresh from the recorded proposals
    tuning_points = np.asarray(warmup["estimator_points"].values)[:, EXPLORATION + 1 :]
    assert np.mean(np.diff(tuning_points, axis=1) == 1) > 0.9
    # during tuning the end point's exact gradient is learned too; afterwards logp only
    gradients = np.asarray(warmup["n_gradient_evals"].values)[:, EXPLORATION:]
    assert (gradients == 1).all()
    assert (sample_stat(correlated_run, "n_gradient_evals") == 0).all()
    assert (sample_stat(correlated_run, "n_logp_evals") == 1).all()


def test_independent_normal_with_frozen_surrogate():
    idata = run(independent_normal(), draws=1000, freeze_after_tuning=True)
    assert (refreshes_after_tuning(idata) == 0).all()
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i], NORMAL_SD[i], f"x[{i}]")


@pytest.mark.parametrize(
    ("kind", "amount"),
    [("shifted", 0.5), ("flattened", 0.3)],
    ids=["shifted-by-half-an-sd", "force-times-0.3"],
)
@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
def test_a_deliberately_wrong_surrogate_that_keeps_learning_still_gives_the_right_answer(
    kind, amount, dynamics
):
    # With NUTS trees, delayed acceptance needs U~ at both ends from the surrogate the tree
    # followed, though the surrogate changes between draws and the chain caches old values.
    surrogate = DistortedSurrogate(kind, amount)
    idata = run(correlated_normal(), draws=2000, surrogate=surrogate, dynamics=dynamics)
    assert (refreshes_after_tuning(idata) >= 5).all()
    assert np.nanmean(np.abs(sample_stat(idata, "surrogate_error"))) > 0.1  # every 10th draw
    assert_correlated_normal(idata, kind, min_ess=100, correlation=False)


def test_every_draw_refreshes_when_the_schedule_says_so():
    idata = run(
        independent_normal(), draws=100, chains=1, refresh_scale=1e9, refit_during_tuning=False
    )
    warmup = np.asarray(idata.warmup_sample_stats["surrogate_refreshes"].values)[0]
    kept = sample_stat(idata, "surrogate_refreshes")[0]
    counts = np.concatenate([warmup, kept])
    # the first surrogate draw uses the fresh fit; every later one refreshes
    np.testing.assert_array_equal(counts[: EXPLORATION + 1], 0)
    np.testing.assert_array_equal(np.diff(counts[EXPLORATION:]), 1)


def test_the_number_of_refreshes_follows_the_vanishing_schedule():
    scale, exponent, tune, draws = 5.0, 0.7, 300, 1500
    idata = run(
        independent_normal(),
        tune=tune,
        draws=draws,
        chains=1,
        refresh_scale=scale,
        refresh_exponent=exponent,
        refit_during_tuning=False,
    )
    probabilities = np.array(
        [refresh_probability(t, scale, exponent) for t in range(1, tune + draws - EXPLORATION)]
    )
    observed = sample_stat(idata, "surrogate_refreshes")[0, -1]
    expected = probabilities.sum()
    spread = np.sqrt(np.sum(probabilities * (1 - probabilities)))
    assert abs(observed - expected) < 4.5 * spread, (observed, expected, spread)
    # and refreshes get rarer, as the schedule says: compare each half of the draws with its
    # expected count
    refreshes = sample_stat(idata, "surrogate_refreshes")[0]
    first_draw = tune - EXPLORATION  # schedule index t of the first draw kept
    for start, stop in [(0, draws // 2), (draws // 2, draws - 1)]:
        window = probabilities[first_draw + start : first_draw + stop]
        observed = refreshes[stop] - refreshes[start]
        spread = np.sqrt(np.sum(window * (1 - window)))
        assert abs(observed - window.sum()) < 4.5 * max(spread, 1.0), (start, observed)


def test_the_default_schedule_vanishes_but_never_stops():
    probabilities = np.array([refresh_probability(t, 10.0, 1.0) for t in range(1, 100_001)])
    assert probabilities[:10].min() == 1.0 and probabilities[-1] < 1e-3
    assert probabilities.sum() > 10 * np.log(10_000)  # harmonic: unbounded as t grows


def test_each_sequential_chain_starts_its_own_estimator():
    sequential = run(independent_normal(), tune=200, draws=20, seed=8)
    first_draw = np.asarray(sequential.warmup_sample_stats["estimator_points"].values)[:, 0]
    np.testing.assert_array_equal(first_draw, [1, 1])


def test_pickles_with_its_learner_and_keeps_learning_after_unpickling():
    model = independent_normal()
    with model:
        step = ARNSHMC(exploration_steps=EXPLORATION)
    start_chain(step, seed=5, tune=100, draws=20)
    point = model.initial_point()
    for _ in range(EXPLORATION + 5):
        point, _ = step.step(point)
    clone = pickle.loads(cloudpickle.dumps(step))
    learned = []
    for draw in range(EXPLORATION + 5, 120):
        if draw == 100:
            clone.stop_tuning()
        point, stats = clone.step(point)
        learned.append(stats[0]["estimator_points"])
    assert learned[-1] > learned[0] + 30  # about one point a learning draw


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("refresh_exponent", 0.0, "refresh_exponent"),
        ("refresh_exponent", 1.5, "refresh_exponent"),
        ("refresh_scale", 0.0, "refresh_scale"),
        ("refresh_scale", np.inf, "refresh_scale"),
        ("freeze_after_tuning", "no", "freeze_after_tuning"),
        ("tuning_gradients", "no", "tuning_gradients"),
        ("refit_during_tuning", "no", "refit_during_tuning"),
    ],
)
def test_invalid_schedule_is_rejected(option, value, message):
    with independent_normal(), pytest.raises(ValueError, match=message):
        ARNSHMC(**{option: value})


def test_a_surrogate_that_cannot_learn_online_is_rejected():
    class FittedOnce:
        def fit(self, positions, potentials, gradients=None, rng=None):
            return self

        def potential(self, positions):
            return 0.0

        def gradient(self, position):
            return np.zeros_like(position)

    with independent_normal(), pytest.raises(TypeError, match="learn online"):
        ARNSHMC(surrogate=FittedOnce())


def test_a_poor_first_fit_postpones_the_surrogate_until_the_latest_start():
    # no fit can meet this start_error: exploration goes on until 70 % of tuning
    tune = 300
    idata = run(independent_normal(), tune=tune, draws=50, chains=1, start_error=1e-12)
    used = np.asarray(idata.warmup_sample_stats["used_surrogate"].values)[0]
    first_surrogate_draw = int(np.argmax(used))
    assert used.any() and first_surrogate_draw > EXPLORATION
    assert first_surrogate_draw <= round(0.7 * tune) + 1


def test_without_the_tuning_length_postponement_is_bounded():
    # PyMC 5 does not tell a step how long tuning is; the postponement must still end
    model = independent_normal()
    with model:
        step = ARNSHMC(start_error=1e-12)
    start_chain(step, seed=6, tune=400, draws=10)
    step._warmup.start.tune = None
    point, draws = model.initial_point(), 0
    used = False
    while not used and draws < 400:
        point, stats = step.step(point)
        # the surrogate phase: a surrogate draw, or the safety net's exact one within it
        used, draws = stats[0]["phase"] in (1, 2), draws + 1
    assert used and draws <= step.schedule.latest_start(None, 3) + 1 < 400


def test_a_refresh_replaces_the_cached_start_gradient():
    step, _ = in_surrogate_phase(seed=7)
    before = step.surrogate
    position = step._chain.cache.position.copy()
    step._update_surrogate()  # a_t = 1: refreshes
    assert step.surrogate is not before and step._chain.cache.force is None
    kernel = step.kernel
    assert kernel.surrogate is step.surrogate
    exact_gradient = step.exact_model.potential_and_gradient  # (U, grad U): its gradient below
    force_field = ForceField(
        step.surrogate.gradient, lambda q: exact_gradient(q)[1], kernel.force_bound
    )
    start, n_evals, _ = step._chain._current_logp(position)
    assert n_evals == 0  # the exact logp stays cached
    point = start_point(kernel, start, step.surrogate, force_field)
    np.testing.assert_array_equal(point.force, step.surrogate.gradient(position))


def test_a_refresh_inside_a_draw_never_falls_back_to_a_slow_least_squares(monkeypatch):
    # lstsq of order s + 1 takes seconds at s = 2000: a refresh whose Cholesky fails skips.
    from pymc_rnshmc.surrogates.network import online_least_squares

    step, point = in_surrogate_phase(seed=7)

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("singular")

    def slow(*args, **kwargs):
        raise AssertionError("lstsq ran inside a draw")

    monkeypatch.setattr(online_least_squares.scipy.linalg, "cho_factor", singular)
    monkeypatch.setattr(online_least_squares.scipy.linalg, "lstsq", slow)
    before = step.surrogate
    with pytest.warns(SurrogateWarning, match="could not refresh"):
        point, stats = step.step(point)
    assert step.surrogate is before and stats[0]["used_surrogate"]
