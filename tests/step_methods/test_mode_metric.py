"""The exploring NUTS from the mode: its metric, and how the explorer starts with it."""

from __future__ import annotations

import pickle

import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

from pymc_rnshmc import RNSHMC
from pymc_rnshmc.step_methods.mode_metric import (
    CORRELATED_CONDITION,
    PRIOR_DRAWS,
    WhitenedDiagAdapt,
)
from tests.models import CORRELATED_COVARIANCE, correlated_normal

COVARIANCE = np.array([[2.0, 0.9, 0.1], [0.9, 1.0, -0.3], [0.1, -0.3, 0.5]])
MODE = np.array([1.0, -1.0, 0.5])


def potential(dtype="float64") -> WhitenedDiagAdapt:
    metric = WhitenedDiagAdapt(3, np.zeros(3, dtype), np.ones(3, dtype), 10, dtype=dtype)
    metric.set_rng(np.random.default_rng(3))
    metric.use_laplace(MODE, COVARIANCE)
    return metric


def test_until_given_a_mode_it_is_pymcs_diagonal_adaptation():
    rng = np.random.default_rng(5)
    ours = WhitenedDiagAdapt(3, np.zeros(3), np.ones(3), 10, rng=np.random.default_rng(1))
    pymcs = QuadPotentialDiagAdapt(3, np.zeros(3), np.ones(3), 10, rng=np.random.default_rng(1))
    for _ in range(250):
        draw = rng.normal(size=3) * [1.0, 2.0, 3.0]
        ours.update(draw, -draw, tune=True)
        pymcs.update(draw, -draw, tune=True)
    momentum = np.array([0.3, -1.2, 2.0])
    np.testing.assert_array_equal(ours.velocity(momentum), pymcs.velocity(momentum))
    assert ours.energy(momentum) == pymcs.energy(momentum)
    np.testing.assert_array_equal(ours.random(), pymcs.random())
    ours.use_laplace(MODE, COVARIANCE)
    assert ours.whitened
    ours.reset()
    assert not ours.whitened


def test_the_kinetic_energy_is_that_of_the_laplace_covariance():
    metric, momentum = potential(), np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(metric.velocity(momentum), COVARIANCE @ momentum)
    expected = 0.5 * momentum @ COVARIANCE @ momentum
    assert metric.energy(momentum) == pytest.approx(expected)
    out = np.empty(3)
    assert metric.velocity_energy(momentum, out) == pytest.approx(expected)
    np.testing.assert_allclose(out, COVARIANCE @ momentum)


def test_momenta_are_drawn_with_the_inverse_covariance():
    metric = potential()
    momenta = np.array([metric.random() for _ in range(40_000)])
    np.testing.assert_allclose(np.cov(momenta.T), np.linalg.inv(COVARIANCE), rtol=0.05, atol=0.05)


def test_adaptation_corrects_the_scale_shrunk_toward_the_approximation():
    """Draws four times wider than the approximation: the metric widens toward them."""
    metric, rng = potential(), np.random.default_rng(4)
    draws = rng.multivariate_normal(MODE, 4.0 * COVARIANCE, size=400)
    for draw in draws:
        metric.update(draw, np.zeros(3), tune=True)
    scale = np.linalg.eigvals(np.linalg.solve(COVARIANCE, metric.covariance())).real
    windowed = 101  # PyMC's window: the estimate holds about this many draws
    shrunk = (windowed * 4.0 + PRIOR_DRAWS) / (windowed + PRIOR_DRAWS)
    np.testing.assert_allclose(scale, shrunk, rtol=0.3)
    frozen = metric.covariance()
    metric.update(draws[0] + 10.0, np.zeros(3), tune=False)
    np.testing.assert_array_equal(metric.covariance(), frozen)


def test_velocity_follows_every_change_of_the_metric():
    """``M^-1`` is formed once per change: adaptation, a new approximation, a restored state."""
    metric, rng, momentum = potential(), np.random.default_rng(6), np.array([0.3, -1.2, 2.0])
    states = []
    for draw in rng.multivariate_normal(MODE, 4.0 * COVARIANCE, size=300):
        metric.update(draw, np.zeros(3), tune=True)
        np.testing.assert_allclose(metric.velocity(momentum), metric.covariance() @ momentum)
        states.append((metric.sampling_state, metric.covariance()))
    state, covariance = states[120]
    metric.sampling_state = state
    np.testing.assert_allclose(metric.velocity(momentum), covariance @ momentum)
    metric.use_laplace(MODE, 2.0 * COVARIANCE)
    np.testing.assert_allclose(metric.velocity(momentum), 2.0 * COVARIANCE @ momentum)


@pytest.mark.parametrize("out_dtype", ["float64", "float32"])
def test_velocity_writes_into_out_of_either_precision(out_dtype):
    """PyMC's leapfrog passes ``out``; one that ``numpy.dot`` refuses gets the product too."""
    metric, momentum = potential(), np.array([0.3, -1.2, 2.0])
    metric.velocity(momentum)  # forms M^-1 (its predecessor served long enough)
    assert metric._inverse_mass is not None
    out = np.full(3, np.nan, dtype=out_dtype)
    assert metric.velocity(momentum, out=out) is out
    np.testing.assert_allclose(out, COVARIANCE @ momentum, rtol=1e-6)


def test_m_inverse_is_formed_only_for_a_metric_expected_to_serve_long_enough():
    # forming costs about d^3, a call d^2: a metric changing at every draw of a wide model
    # (each serving fewer than d / 2 calls) is applied by its two factors instead
    dim, rng = 40, np.random.default_rng(5)
    metric = WhitenedDiagAdapt(
        dim, np.zeros(dim), np.ones(dim), 10, adaptation_window=5, discard_window=0
    )
    metric.set_rng(np.random.default_rng(3))
    metric.use_laplace(np.zeros(dim), np.eye(dim) + 0.5)
    momentum = rng.normal(size=dim)
    for draw in rng.normal(size=(30, dim)):
        metric.update(draw, np.zeros(dim), tune=True)
        for _ in range(3):  # fewer than d / 2 leapfrog steps a draw
            np.testing.assert_allclose(
                metric.velocity(momentum), metric.covariance() @ momentum, rtol=1e-10
            )
    assert metric._inverse_mass is None
    for _ in range(dim // 2 - 3):  # a metric that lasts (after tuning) is formed once it served
        metric.velocity(momentum)  # d / 2 calls
    assert metric._inverse_mass is not None
    metric.update(rng.normal(size=dim), np.zeros(dim), tune=True)
    for _ in range(dim):  # a draw of many steps: the next metric is formed at once
        metric.velocity(momentum)
    metric.update(rng.normal(size=dim), np.zeros(dim), tune=True)
    np.testing.assert_allclose(metric.velocity(momentum), metric.covariance() @ momentum)
    assert metric._inverse_mass is not None


def test_single_precision_pickling_and_sampling_state():
    metric = potential("float32")
    assert metric.random().dtype == np.float32
    assert metric.velocity(np.ones(3, dtype=np.float32)).dtype == np.float32
    again = pickle.loads(pickle.dumps(metric))
    np.testing.assert_allclose(again.covariance(), metric.covariance())
    fresh = potential("float32")
    fresh.reset()
    fresh.sampling_state = metric.sampling_state  # the mode and factor travel with the state
    assert fresh.whitened
    np.testing.assert_allclose(fresh.covariance(), metric.covariance())


def test_a_covariance_that_is_not_positive_definite_raises_and_changes_nothing():
    metric = potential()
    before = metric.covariance()
    with pytest.raises(np.linalg.LinAlgError):
        metric.use_laplace(np.zeros(3), -np.eye(3))
    np.testing.assert_array_equal(metric.covariance(), before)


def strongly_correlated_draws(n_draws: int = 300, seed: int = 8) -> np.ndarray:
    """Draws of a 6-d normal with one correlation of 0.99 (condition number about 200)."""
    covariance = np.eye(6)
    covariance[0, 1] = covariance[1, 0] = 0.99
    scales = np.array([1.0, 5.0, 0.1, 2.0, 1.0, 3.0])
    covariance = scales[:, None] * covariance * scales[None, :]
    return np.random.default_rng(seed).multivariate_normal(np.ones(6), covariance, size=n_draws)


def test_strongly_correlated_draws_whiten_the_metric():
    metric, draws = WhitenedDiagAdapt(6, np.zeros(6), np.ones(6), 10), strongly_correlated_draws()
    assert metric.use_draws(draws)
    assert metric.whitened
    found = metric.covariance()
    assert found[0, 1] / np.sqrt(found[0, 0] * found[1, 1]) == pytest.approx(0.99, abs=0.005)
    kept = draws[metric._discard_window :]  # PyMC's discarded first draws left out
    np.testing.assert_allclose(np.sqrt(np.diag(found)), np.std(kept, axis=0, ddof=1), rtol=0.01)


def test_weakly_correlated_draws_leave_the_diagonal_metric():
    """Correlations of 0.8 give a condition number of 13, under ``CORRELATED_CONDITION``."""
    assert CORRELATED_CONDITION > 13.0
    covariance = np.full((3, 3), 0.8) + 0.2 * np.eye(3)
    draws = np.random.default_rng(9).multivariate_normal(np.zeros(3), covariance, size=400)
    metric = WhitenedDiagAdapt(3, np.zeros(3), np.ones(3), 10)
    assert not metric.use_draws(draws)
    assert not metric.use_draws(draws[:1])
    assert not metric.whitened


def test_draws_that_are_few_or_not_finite_leave_the_metric():
    metric, draws = WhitenedDiagAdapt(6, np.zeros(6), np.ones(6), 10), strongly_correlated_draws()
    assert not metric.use_draws(draws[: metric._discard_window + 6])  # not more than d kept
    broken = draws.copy()
    broken[100, 2] = np.nan
    assert not metric.use_draws(broken)
    assert not metric.whitened


def test_the_verdicts_two_questions_about_the_same_draws_compute_the_covariance_once(
    monkeypatch,
):
    """``takes_metric_from`` then ``resume`` ask about one chain's draws: five
    eigendecompositions each, 3.7 s at d = 1507; other values are computed afresh."""
    import pymc_rnshmc.step_methods.mode_metric as mode_metric

    computed = []

    def counted(draws):
        computed.append(len(draws))
        return covariance_beyond_noise(draws)

    covariance_beyond_noise = mode_metric.covariance_beyond_noise
    monkeypatch.setattr(mode_metric, "covariance_beyond_noise", counted)
    metric, draws = WhitenedDiagAdapt(6, np.zeros(6), np.ones(6), 10), strongly_correlated_draws()
    asked = metric.metric_from_draws(draws)
    assert metric.use_draws(draws.copy())  # the same values in another array
    assert len(computed) == 1
    np.testing.assert_allclose(metric.covariance(), asked, rtol=1e-10)
    changed = draws.copy()
    changed[-1, 0] += 1e-9
    metric.metric_from_draws(changed)
    metric.metric_from_draws(draws)  # use_draws forgot the draws it took
    assert len(computed) == 3


def test_a_metric_from_draws_travels_with_the_sampling_state_and_reset_clears_it():
    metric = WhitenedDiagAdapt(6, np.zeros(6), np.ones(6), 10, dtype="float32")
    assert metric.use_draws(strongly_correlated_draws())
    assert metric.random().dtype == np.float32
    again = pickle.loads(pickle.dumps(metric))
    fresh = WhitenedDiagAdapt(6, np.zeros(6), np.ones(6), 10, dtype="float32")
    fresh.sampling_state = metric.sampling_state
    for restored in (again, fresh):
        assert restored.from_draws
        np.testing.assert_allclose(restored.covariance(), metric.covariance())
    fresh.reset()
    assert not fresh.from_draws and not fresh.whitened


def tuning_stats(model, step, tune: int = 40, seed: int = 7):
    """The tuning draws' stats of one chain of ``tune`` tuning draws (and five kept)."""
    with model:
        idata = pm.sample(
            step=step,
            tune=tune,
            draws=5,
            chains=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    return idata.warmup_sample_stats


def first_tuning_draws(model, **options):
    with model:
        step = RNSHMC(exploration_steps=30, weigh_costs=False, **options)
    return step, tuning_stats(model, step)


def test_the_exploration_starts_at_the_mode_with_its_covariance():
    step, stats = first_tuning_draws(correlated_normal())
    explorer = step._explorer
    assert explorer.nuts.potential.whitened
    assert explorer.nuts.integrator._potential is explorer.nuts.potential
    gradients = stats["n_gradient_evals"].values.ravel()
    # the search's, the curvature's (2 d) and the importance check's (20), counted
    assert gradients[0] > 2 * 2 + 20 + stats["n_steps"].values.ravel()[0]
    variances, covariance, _ = explorer.metric()
    assert variances is None
    # no adaptation window has closed yet: the Laplace covariance itself
    np.testing.assert_allclose(covariance, CORRELATED_COVARIANCE, rtol=1e-4, atol=1e-6)


def test_a_second_call_searches_again_from_plain_nuts():
    model = correlated_normal()
    step, stats = first_tuning_draws(model)
    first = stats["n_gradient_evals"].values.ravel()[0]
    again = tuning_stats(model, step, tune=3, seed=8)["n_gradient_evals"].values.ravel()[0]
    assert again > 2 * 2 + 20 and first > 2 * 2 + 20
    assert step._explorer.nuts.potential.whitened


@pytest.mark.parametrize(
    "options", [{"explore_from_mode": False}, {"scaling": np.ones(2)}], ids=["off", "users"]
)
def test_off_or_with_the_users_metric_nuts_explores_as_pymc_s(options):
    step, stats = first_tuning_draws(correlated_normal(), **options)
    assert not isinstance(step._explorer.nuts.potential, WhitenedDiagAdapt)
    assert stats["n_gradient_evals"].values.ravel()[0] <= 2**10


def neals_funnel() -> pm.Model:
    with pm.Model() as model:
        log_scale = pm.Normal("v", 0.0, 3.0)
        pm.Normal("x", 0.0, pm.math.exp(log_scale / 2.0), shape=4)
    return model


def test_without_a_mode_nuts_explores_as_pymc_s():
    """Neal's funnel rises for ever down its neck: no mode, so PyMC's diagonal metric."""
    step, stats = first_tuning_draws(neals_funnel())
    assert not step._explorer.nuts.potential.whitened
    assert stats["n_gradient_evals"].values.ravel()[0] > 20  # the search was made and counted


def test_exact_nuts_resuming_without_a_mode_whitens_by_correlated_draws_only():
    step, _ = first_tuning_draws(neals_funnel())
    explorer, draws = step._explorer, strongly_correlated_draws()[:, :5]
    assert explorer.takes_metric_from(draws, tuning_draws_left=400)
    assert not explorer.takes_metric_from(draws, tuning_draws_left=50)  # as resume would not
    independent = np.random.default_rng(1).normal(size=(300, 5))
    assert not explorer.takes_metric_from(independent, tuning_draws_left=400)
    explorer.resume(tuning_draws_left=50, draws=draws)  # too few left to adapt afresh
    assert not explorer.nuts.potential.whitened
    explorer.resume(tuning_draws_left=400, draws=draws)
    potential = explorer.nuts.potential
    assert potential.whitened and potential.from_draws
    assert explorer.takes_metric_from(draws[:0], None)  # it has one now, whatever the draws
    explorer.resume(tuning_draws_left=400, draws=2.0 * draws)  # a later resume: the new draws
    refreshed, sample = potential.covariance(), 4.0 * np.cov(draws.T)
    np.testing.assert_allclose(np.diag(refreshed), np.diag(sample), rtol=0.05)
    assert refreshed[0, 1] == pytest.approx(sample[0, 1], rel=0.05)


def test_a_modes_metric_is_not_replaced_by_the_draws():
    step, _ = first_tuning_draws(correlated_normal())
    explorer = step._explorer
    laplace = explorer.nuts.potential.covariance()
    draws = np.random.default_rng(2).multivariate_normal([0.0, 0.0], [[1, 0.999], [0.999, 1]], 300)
    assert explorer.nuts.potential.whitened
    assert not explorer.takes_metric_from(draws, tuning_draws_left=400)
    explorer.resume(tuning_draws_left=400, draws=draws)
    np.testing.assert_array_equal(explorer.nuts.potential.covariance(), laplace)


def test_the_search_starts_from_the_chains_start_and_stays_reproducible():
    _, first = first_tuning_draws(correlated_normal())
    _, again = first_tuning_draws(correlated_normal())
    np.testing.assert_array_equal(first["lp"].values, again["lp"].values)
    assert np.all(np.isfinite(first["lp"].values))
