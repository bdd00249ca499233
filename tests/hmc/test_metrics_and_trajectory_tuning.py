import numpy as np
import pytest
from scipy import linalg

from pymc_rnshmc.hmc.metrics import DenseMetric, DiagonalMetric, dense_metric_from_gradients
from pymc_rnshmc.hmc.trajectory_candidates import (
    covariance_estimate,
    held_out_quarter_period,
    quarter_period,
)
from pymc_rnshmc.hmc.trajectory_tuning import effective_sample_size_per_draw, tune
from tests.checks import effective_sample_size


@pytest.mark.parametrize(
    "metric",
    [
        DiagonalMetric(np.array([4.0, 0.25, 1.0])),
        DenseMetric(np.array([[2.0, 0.9, 0], [0.9, 1.0, 0], [0, 0, 0.5]])),
    ],
    ids=["diagonal", "dense"],
)
def test_metric_momenta_have_the_mass_matrix_as_covariance(metric):
    rng = np.random.default_rng(0)
    momenta = metric.random(rng, 200_000)
    covariance = metric.covariance if metric.kind == "dense" else np.diag(metric.variances)
    np.testing.assert_allclose(np.cov(momenta.T), np.linalg.inv(covariance), rtol=0.02, atol=0.01)
    one = metric.random(rng)
    assert one.shape == (3,)
    # energy is half of p . velocity, for one vector and for rows
    np.testing.assert_allclose(metric.energy(one), 0.5 * one @ metric.velocity(one))
    np.testing.assert_allclose(metric.energy(momenta[:5]), [metric.energy(p) for p in momenta[:5]])


def test_dense_metric_from_gradients_recovers_a_gaussian_covariance():
    rng = np.random.default_rng(1)
    covariance = np.array([[1.0, 0.95], [0.95, 1.0]]) * [[100.0, 1.0], [1.0, 0.01]]
    positions = rng.multivariate_normal([3.0, -1.0], covariance, size=60)
    gradients = (positions - [3.0, -1.0]) @ np.linalg.inv(covariance)
    metric = dense_metric_from_gradients(positions, gradients)
    np.testing.assert_allclose(metric.covariance, covariance, rtol=1e-6)


def test_invalid_diagonal_metric_is_rejected():
    with pytest.raises(ValueError, match="positive"):
        DiagonalMetric(np.array([1.0, 0.0]))


@pytest.mark.parametrize("correlation", [-0.6, 0.0, 0.8])
def test_vectorized_ess_matches_arviz_on_autoregressive_chains(correlation):
    rng = np.random.default_rng(2)
    chains, draws = 8, 2000
    samples = np.zeros((chains, draws, 1))
    for t in range(1, draws):
        samples[:, t, 0] = correlation * samples[:, t - 1, 0] + rng.normal(size=chains)
    ours = effective_sample_size_per_draw(samples)[0]
    theirs = effective_sample_size(samples[..., 0], "mean") / (chains * draws)
    expected = (1 - correlation) / (1 + correlation)
    assert ours == pytest.approx(theirs, rel=0.1)
    assert ours == pytest.approx(expected, rel=0.15)


def _tune_on_a_gaussian(seed: int, dim: int = 4, out_of_time=None):
    rng = np.random.default_rng(seed)

    def potential(points):
        return 0.5 * np.sum(points**2, axis=-1)

    def gradient(points):
        return points

    starts = rng.normal(size=(16, dim))
    return tune(
        potential,
        gradient,
        [(DiagonalMetric(np.ones(dim)), 0.5)],  # a poor start: the scan must find the way
        length_ratios=2.0 ** (np.arange(-2, 9) / 2),  # 0.25 .. 8
        initial_step_size=0.5,
        starts=starts,
        cost_per_step=0.01,
        rng=rng,
        out_of_time=out_of_time,
    )


def test_tuning_on_a_gaussian_prefers_settings_that_mix_means_and_squares():
    # A standard normal oscillates with period 2 pi. A quarter period mixes means and squares;
    # a bit longer makes means antithetic (ESS above one per draw) while squares still mix;
    # half a period would make means perfectly antithetic and squares stuck. The rule keeps
    # at least half the best mixing of squares and then takes the most ESS for means. The
    # scores come from short simulated chains, so the choice is right for most seeds, not all.
    choices = [_tune_on_a_gaussian(seed) for seed in range(10)]
    in_range = sum(1.0 < choice.best.path_length < 2.6 for choice in choices)
    assert in_range >= 7, [choice.best.path_length for choice in choices]
    for choice in choices:
        best = choice.best
        assert best.ess_square >= 0.5 * max(c.ess_square for c in choice.candidates)
        assert 0.8 < best.acceptance <= 1.0
    assert any(
        any(c.ess_mean > choice.best.ess_mean for c in choice.candidates) for choice in choices
    ), "antithetic trap avoided"


def test_a_scan_out_of_time_stops_with_the_candidates_scored_so_far():
    full = _tune_on_a_gaussian(seed=1)
    asked = []

    def out_of_time() -> bool:  # asked at the start, after the metric, before each length
        asked.append(True)
        return len(asked) > 4  # spent after two lengths of the scan

    cut = _tune_on_a_gaussian(seed=1, out_of_time=out_of_time)
    assert len(full.candidates) > 3
    assert len(cut.candidates) == 3  # the metric's own length and two of the scan
    scores = [[(c.path_length, c.ess_mean) for c in choice.candidates] for choice in (cut, full)]
    assert scores[0] == scores[1][:3]  # the same simulations, in the same order
    assert cut.best in cut.candidates


def test_out_of_time_from_the_start_scores_the_first_metric_only():
    rng = np.random.default_rng(3)
    metrics = [DiagonalMetric(np.ones(3)), DenseMetric(np.eye(3)), DiagonalMetric(np.full(3, 2.0))]
    choice = tune(
        lambda points: 0.5 * np.sum(points**2, axis=-1),
        lambda points: points,
        ((metric, 1.5) for metric in metrics),
        length_ratios=2.0 ** (np.arange(-2, 3) / 4),
        initial_step_size=0.5,
        starts=rng.normal(size=(16, 3)),
        cost_per_step=0.01,
        rng=rng,
        out_of_time=lambda: True,
    )
    assert [c.metric for c in choice.candidates] == [metrics[0]]
    assert choice.best.metric is metrics[0] and choice.best.path_length == 1.5


def test_out_of_time_from_the_start_makes_no_metric_it_will_not_score():
    made = []

    def metrics():
        for scale in (1.0, 2.0):
            made.append(scale)
            yield DiagonalMetric(np.full(3, scale)), 1.5

    rng = np.random.default_rng(4)
    arguments = {
        "length_ratios": np.ones(1),
        "initial_step_size": 0.5,
        "starts": rng.normal(size=(16, 3)),
        "cost_per_step": 0.01,
    }
    gaussian = (lambda points: 0.5 * np.sum(points**2, axis=-1), lambda points: points)
    sole = tune(
        *gaussian, metrics(), rng=np.random.default_rng(5), out_of_time=lambda: True, **arguments
    )
    assert made == [1.0] and len(sole.candidates) == 1
    made.clear()
    both = tune(*gaussian, metrics(), rng=np.random.default_rng(5), **arguments)
    assert made == [1.0, 2.0] and len(both.candidates) == 2
    # the sole candidate's simulation chooses nothing: it is short
    assert sole.best.step_size == both.candidates[0].step_size
    assert sole.best.ess_mean != both.candidates[0].ess_mean


def test_the_quarter_period_is_that_of_the_slowest_direction_under_the_metric():
    covariance = np.array([[4.0, 0.0], [0.0, 1.0]])
    assert np.isclose(quarter_period(DenseMetric(covariance), covariance), np.pi / 2)
    assert np.isclose(quarter_period(DiagonalMetric(np.ones(2)), covariance), np.pi)
    assert np.isclose(quarter_period(DiagonalMetric(np.array([1.0, 0.25])), covariance), np.pi)


def test_the_covariance_estimate_keeps_a_narrow_ridge():
    """A jitter of 1e-10 of the average variance widened this ridge 40-fold."""
    scales = np.array([30.0, 0.0073])
    correlation = -0.99999
    covariance = np.array([[1.0, correlation], [correlation, 1.0]]) * np.outer(scales, scales)
    positions = np.random.default_rng(0).multivariate_normal([0.0, 0.0], covariance, size=400)
    estimate = covariance_estimate(positions)
    sample = np.cov(positions.T)
    ratios = linalg.eigh(estimate, sample, eigvals_only=True)
    np.testing.assert_allclose(ratios, 1.0, atol=1e-3)
    assert quarter_period(DenseMetric(sample), estimate) == pytest.approx(np.pi / 2, rel=1e-3)
    held_out = held_out_quarter_period(DenseMetric(sample), positions)
    assert held_out == pytest.approx(np.pi / 2, rel=0.15)


def test_the_held_out_quarter_period_sees_through_sampling_noise():
    """Independent draws of a whitened Gaussian: the in-sample slowest direction is noise."""
    metric = DenseMetric(np.eye(160))
    in_sample, held_out = [], []
    for seed in range(5):
        draws = np.random.default_rng(seed).normal(size=(180, 160))
        in_sample.append(quarter_period(metric, covariance_estimate(draws)))
        held_out.append(held_out_quarter_period(metric, draws))
    assert min(in_sample) > 1.8 * np.pi / 2
    np.testing.assert_allclose(held_out, np.pi / 2, rtol=0.2)


def test_the_held_out_quarter_period_keeps_a_truly_slow_direction():
    """A direction of variance 9 among 80: found, if a little short (its direction is noisy)."""
    scales = np.ones(80)
    scales[7] = 3.0
    metric = DenseMetric(np.eye(80))
    ratios = [
        held_out_quarter_period(metric, np.random.default_rng(seed).normal(size=(150, 80)) * scales)
        / (3.0 * np.pi / 2)
        for seed in range(10)
    ]
    assert 0.85 < np.median(ratios) < 1.05
    assert min(ratios) > 0.7


def test_the_held_out_quarter_period_falls_back_where_it_cannot_split():
    """Too few draws, or a draw that is not finite: the quarter period of the draws' spread."""
    metric = DiagonalMetric(np.ones(2))
    few = np.random.default_rng(3).normal(size=(12, 2)) * np.array([2.0, 0.5])
    assert held_out_quarter_period(metric, few) == quarter_period(metric, covariance_estimate(few))
    broken = np.random.default_rng(4).normal(size=(60, 2))
    broken[5, 1] = np.nan
    assert held_out_quarter_period(metric, broken) == np.pi / 2
