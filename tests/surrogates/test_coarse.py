"""The coarse-plus-correction surrogate: its choice, its held-out errors, its failures."""

import copy

import numpy as np
import pytest

from pymc_rnshmc.surrogates import SurrogateFitError
from pymc_rnshmc.surrogates.coarse import CoarseCorrectedSurrogate
from pymc_rnshmc.surrogates.network.held_out_selection import validation_mask
from pymc_rnshmc.surrogates.network.random_network import RandomNetworkSurrogate
from pymc_rnshmc.surrogates.whitening import Whitening

D = 4
PRECISION = np.linalg.inv(0.6 ** np.abs(np.subtract.outer(np.arange(D), np.arange(D))))


def exact(q):
    """A correlated Gaussian with a quartic bump: ``U`` and ``grad U``."""
    return 0.5 * q @ PRECISION @ q + 0.05 * np.sum(q**4), PRECISION @ q + 0.2 * q**3


def wrong_coarse(q):
    """An isotropic Gaussian in the wrong place: the shape of the posterior, badly."""
    shifted = q - 0.5
    return 0.3 * shifted @ shifted, 0.6 * shifted


def failing_coarse(q):
    """``wrong_coarse``, raising where the first coordinate is above one."""
    if q[0] > 1.0:
        raise RuntimeError("solver diverged")
    return wrong_coarse(q)


def training(n=300, seed=1):
    rng = np.random.default_rng(seed)
    positions = rng.standard_normal((n, D))
    pairs = [exact(q) for q in positions]
    return positions, np.array([u for u, _ in pairs]), np.stack([g for _, g in pairs])


def fitted(coarse=wrong_coarse, gradients=True, **network):
    positions, potentials, grads = training()
    surrogate = CoarseCorrectedSurrogate(coarse, RandomNetworkSurrogate(**network))
    return surrogate.fit(positions, potentials, grads if gradients else None, rng=3)


def test_the_correction_fixes_a_wrong_coarse_model():
    surrogate = fitted()
    errors = surrogate.report.errors
    assert surrogate.choice == "corrected"
    assert errors.coarse > 0.5
    assert errors.corrected < 0.05
    q = np.random.default_rng(7).standard_normal(D)
    np.testing.assert_allclose(surrogate.gradient(q), exact(q)[1], atol=0.1)
    potential, gradient = surrogate.potential_and_gradient(q)
    np.testing.assert_allclose(gradient, surrogate.gradient(q))
    assert potential == pytest.approx(surrogate.potential(q))
    rows = np.random.default_rng(8).standard_normal((3, D))
    np.testing.assert_allclose(surrogate.gradient(rows)[1], surrogate.gradient(rows[1]))
    assert "coarse + correction" in surrogate.report.summary()


def test_the_corrected_error_is_the_error_measured_on_the_held_out_points():
    # the report rescales the correction's own held-out error; measure it directly instead: a
    # correction fitted without the held-out points, then the corrected surrogate's gradient
    # error there relative to the spread of the exact gradients (whitened, as the network does)
    positions, potentials, gradients = training()
    held_out = validation_mask(len(positions), 0.2)
    options = {"n_hidden": 60, "weight_scale": 0.3}
    surrogate = fitted(**options)
    penalty = surrogate.correction.report.penalty
    alone = CoarseCorrectedSurrogate(
        wrong_coarse, RandomNetworkSurrogate(**options, penalty=penalty, validation_fraction=0)
    )
    alone.fit(positions[~held_out], potentials[~held_out], gradients[~held_out], rng=3)
    whitening = Whitening.from_positions(positions)
    exact_held_out = whitening.gradient_to_whitened(gradients[held_out])
    miss = exact_held_out - whitening.gradient_to_whitened(alone.gradient(positions[held_out]))
    spread = np.mean(np.sum((exact_held_out - exact_held_out.mean(axis=0)) ** 2, axis=1))
    direct = np.sqrt(np.mean(np.sum(miss**2, axis=1)) / spread)
    assert surrogate.report.errors.corrected == pytest.approx(
        direct, rel=0.2
    )  # its own whitening: not the same network


def test_an_exact_coarse_model_moves_alone_and_says_the_network_is_worse():
    surrogate = fitted(coarse=exact)
    assert surrogate.choice == "coarse"
    assert surrogate.report.errors.coarse == pytest.approx(0.0, abs=1e-12)
    assert not surrogate.report.network_predicts_better
    q = np.full(D, 0.3)
    np.testing.assert_allclose(surrogate.gradient(q), exact(q)[1])
    assert "moving by the coarse model alone" in surrogate.report.summary()


def test_the_report_says_when_the_network_alone_predicts_better():
    def useless(q):  # a coarse model with a rough, unlearnable error
        return 0.0, np.sin(40 * q)

    surrogate = fitted(coarse=useless)
    assert surrogate.report.network_predicts_better
    assert "the network alone predicts better" in surrogate.report.summary()


def test_trajectory_simulations_run_on_the_network_alone():
    surrogate = CoarseCorrectedSurrogate(wrong_coarse)
    assert surrogate.simulation_proxy() is surrogate  # unfitted
    surrogate = fitted()
    assert isinstance(surrogate.simulation_proxy(), RandomNetworkSurrogate)
    assert surrogate.simulation_proxy() is surrogate.network
    assert (
        surrogate.approximate_covariance() is None
        or surrogate.approximate_covariance().shape == (D, D)
    )


def test_values_only_fits_correct_the_values_and_the_proxy_follows_the_moving_force():
    surrogate = fitted(gradients=False)
    errors = surrogate.report.errors
    assert not surrogate.report.with_gradients
    assert errors.corrected < errors.coarse
    assert np.isnan(errors.network)
    q = np.random.default_rng(9).standard_normal((20, D))
    proxy = surrogate.simulation_proxy()
    np.testing.assert_allclose(
        proxy.gradient(q), surrogate.gradient(q), atol=0.2 * np.abs(surrogate.gradient(q)).max()
    )


def test_a_failing_coarse_model_loses_its_points_and_its_force_there():
    surrogate = fitted(coarse=failing_coarse)
    positions = training()[0]
    assert surrogate.report.coarse_failures == int(np.sum(positions[:, 0] > 1.0)) > 0
    assert surrogate.report.n_points == len(positions) - surrogate.report.coarse_failures
    assert np.isnan(surrogate.report.errors.network)  # fitted on other rows: not comparable
    outside = np.array([1.5, 0.0, 0.0, 0.0])  # the network alone stands in there
    np.testing.assert_array_equal(surrogate.gradient(outside), surrogate.network.gradient(outside))
    assert surrogate.potential(outside) == pytest.approx(surrogate.network.potential(outside))
    surrogate.network = None
    assert np.all(np.isnan(surrogate.gradient(outside)))
    assert surrogate.potential(outside) == np.inf
    with pytest.raises(SurrogateFitError, match="failed at every training point"):
        fitted(coarse=lambda q: (np.nan, q))


def test_copies_share_the_coarse_model_and_fit_on_their_own():
    surrogate = CoarseCorrectedSurrogate(wrong_coarse)
    other = copy.deepcopy(surrogate)
    assert other.coarse is surrogate.coarse
    assert other.template is not surrogate.template
    positions, potentials, gradients = training()
    other.fit(positions, potentials, gradients, rng=1)
    assert surrogate.report is None and surrogate.correction is None


def test_the_choice_can_be_forced_for_studies():
    positions, potentials, gradients = training()
    forced = CoarseCorrectedSurrogate(wrong_coarse, moves_by="coarse")
    forced.fit(positions, potentials, gradients, rng=3)
    assert forced.choice == "coarse"
    assert forced.report.errors.corrected < forced.report.errors.coarse
    q = np.full(D, 0.2)
    np.testing.assert_allclose(forced.gradient(q), wrong_coarse(q)[1])
    with pytest.raises(ValueError, match="moves_by"):
        CoarseCorrectedSurrogate(wrong_coarse, moves_by="network")


def gradient_error(surrogate, rows):
    """Relative error of the surrogate's gradient against the exact one at ``rows``."""
    truth = np.stack([exact(q)[1] for q in rows])
    return np.linalg.norm(surrogate.gradient(rows) - truth) / np.linalg.norm(truth)


def test_the_online_learner_learns_the_correction_from_new_exact_points():
    # fitted on 30 points near the origin, it learns from 400 spread wider: its error on wide
    # test points falls, and the learned copy still adds the coarse model's force
    rng = np.random.default_rng(4)
    near = 0.5 * rng.standard_normal((30, D))
    potentials = np.array([exact(q)[0] for q in near])
    gradients = np.stack([exact(q)[1] for q in near])
    surrogate = CoarseCorrectedSurrogate(wrong_coarse, RandomNetworkSurrogate(n_hidden=60))
    surrogate.fit(near, potentials, gradients, rng=3)
    learner = surrogate.online_estimator(near, potentials, gradients)
    for q in 1.5 * rng.standard_normal((400, D)):
        learner.add(q, *exact(q))
    assert learner.n_points == 430
    updated = learner.updated_surrogate()
    assert updated is not surrogate and updated.correction is not surrogate.correction
    assert updated.coarse is surrogate.coarse and updated.choice == surrogate.choice
    tests = 1.5 * rng.standard_normal((200, D))
    assert gradient_error(updated, tests) < 0.8 * gradient_error(surrogate, tests)


def test_the_online_learner_skips_points_where_the_coarse_model_fails():
    surrogate = fitted(coarse=failing_coarse)
    positions, potentials, grads = training()
    learner = surrogate.online_estimator(positions, potentials, grads)
    start = learner.n_points
    assert start < len(positions)  # the failing rows left out from the start too
    inside, outside = np.full(D, 0.1), np.full(D, 2.0)  # the coarse model fails outside
    learner.add(outside, *exact(outside))
    assert learner.n_points == start
    learner.add(inside, *exact(inside))
    assert learner.n_points == start + 1


def test_without_a_correction_the_online_learner_keeps_the_surrogate():
    surrogate = fitted(coarse=exact)
    surrogate.correction = None  # as after a failed correction fit
    learner = surrogate.online_estimator(*training())
    learner.add(np.zeros(D), *exact(np.zeros(D)))
    assert learner.n_points == 0 and learner.updated_surrogate() is surrogate
