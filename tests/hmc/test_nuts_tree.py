"""The NUTS tree on a surrogate and its delayed-acceptance correction, without PyMC."""

import numpy as np
import pytest

from pymc_rnshmc.hmc.corrections import DelayedAcceptance, Evaluation
from pymc_rnshmc.hmc.metrics import DiagonalMetric
from pymc_rnshmc.hmc.nuts_tree import surrogate_nuts
from pymc_rnshmc.hmc.proposals import Move
from tests.checks import assert_moments

SDS = np.array([0.5, 1.0, 2.0])
MEANS = np.array([1.0, -2.0, 0.5])


def gaussian(means, sds):
    """``q -> (U, grad U)`` of independent normals."""

    def potential_and_gradient(q):
        z = (q - means) / sds
        return 0.5 * float(z @ z), z / sds

    return potential_and_gradient


def chains(first_stage, second_stage, metric, step_size, n_draws, seed, n_chains=2):
    """``(chain, draw, d)`` draws of NUTS on ``first_stage``, corrected by delayed acceptance
    with ``second_stage`` (``None``: uncorrected), and the second-stage acceptance rate."""
    rng = np.random.default_rng(seed)
    draws, accepted = np.empty((n_chains, n_draws, len(SDS))), []
    for chain in range(n_chains):
        q = MEANS + rng.normal(size=len(SDS)) * SDS
        for i in range(n_draws):
            potential, gradient = first_stage(q)
            tree = surrogate_nuts(q, potential, gradient, first_stage, metric, step_size, rng)
            y = tree.sample.position
            if second_stage is not None:
                log_ratio = (second_stage(q)[0] - potential) - (
                    second_stage(y)[0] - tree.sample.potential
                )
                move = rng.random() < np.exp(min(0.0, log_ratio))
                accepted.append(move)
                q = y if move else q
            else:
                q = y
            draws[chain, i] = q
    return draws, np.mean(accepted) if accepted else 1.0


def assert_gaussian(draws, min_ess=500):
    for i in range(len(SDS)):
        assert_moments(draws[..., i], MEANS[i], SDS[i], f"q[{i}]", min_ess=min_ess)


# Steps near the leapfrog's stability limit (2 sd with a unit metric): the energy errors make
# the states' weights uneven, which is where a draw from the trajectory that is not reversible
# shows (always taking the newest subtree's state gave an sd 17-32 MCSE off here).
def test_nuts_on_the_exact_potential_samples_it():
    draws, _ = chains(gaussian(MEANS, SDS), None, DiagonalMetric(np.ones(3)), 0.8, 3000, seed=1)
    assert_gaussian(draws)


@pytest.mark.parametrize(
    ("means", "sds"),
    [(MEANS + 0.5 * SDS, SDS), (MEANS, 1.6 * SDS), (MEANS - 0.4 * SDS, 0.7 * SDS)],
    ids=["shifted", "too-wide", "shifted-and-too-narrow"],
)
def test_delayed_acceptance_corrects_a_wrong_surrogate(means, sds):
    # Detailed balance of the first stage is what makes this exact: a NUTS that only left
    # exp(-U~) invariant would leave a bias here.
    metric = DiagonalMetric(sds**2)  # the surrogate's scales: every direction near the limit
    draws, acceptance = chains(gaussian(means, sds), gaussian(MEANS, SDS), metric, 1.6, 5000, 2)
    assert 0.2 < acceptance < 0.95  # the surrogate is visibly wrong, and still useful
    assert_gaussian(draws, min_ess=300)


def test_the_tree_reports_its_work_and_moves_far():
    rng = np.random.default_rng(3)
    target = gaussian(MEANS, SDS)
    metric = DiagonalMetric(SDS**2)
    depths, steps, distances = [], [], []
    for _ in range(200):
        q = MEANS + rng.normal(size=3) * SDS
        tree = surrogate_nuts(q, *target(q), target, metric, 0.3, rng)
        depths.append(tree.depth)
        steps.append(tree.n_steps)
        distances.append(np.linalg.norm((tree.sample.position - q) / SDS))
        assert tree.n_steps <= 2**tree.depth - 1
        assert 0 < tree.mean_accept <= 1
        assert not tree.divergent and not tree.reached_max_depth
        assert (tree.index == 0) == np.array_equal(tree.sample.position, q)
    assert 2 <= np.mean(depths) <= 5
    assert np.mean(distances) > 1.0  # biased progressive sampling favours far states


def test_an_exploding_surrogate_is_a_divergence_not_a_crash():
    def cliff(q):
        if q[0] > 1.5:
            return np.inf, np.full(3, np.nan)
        return gaussian(np.zeros(3), np.ones(3))(q)

    rng = np.random.default_rng(4)
    divergent = 0
    for _ in range(100):
        q = np.array([1.0, 0.0, 0.0])
        tree = surrogate_nuts(q, *cliff(q), cliff, DiagonalMetric(np.ones(3)), 0.5, rng)
        divergent += tree.divergent
        assert tree.sample.position[0] <= 1.5  # never a state beyond the cliff
    assert divergent > 10


def test_the_depth_limit_holds():
    rng = np.random.default_rng(5)
    target = gaussian(np.zeros(3), np.ones(3))
    q = np.zeros(3) + 0.1
    tree = surrogate_nuts(q, *target(q), target, DiagonalMetric(np.ones(3)), 1e-3, rng, max_depth=4)
    assert tree.depth == 4 and tree.n_steps == 2**4 - 1 and tree.reached_max_depth


def _move(start_potential, end_potential, index=None):
    return Move(
        np.array([1.0]),
        np.zeros(1),
        0.3,
        0.7,
        5,
        False,
        start_potential=start_potential,
        end_potential=end_potential,
        index=index,
    )


def test_the_second_stage_uses_the_surrogate_values_the_move_carries():
    correction = DelayedAcceptance(1000.0)
    evaluated = []

    def evaluate(position):
        evaluated.append(position)
        return Evaluation(position, -4.0)

    # pi(y) / pi(x) = e^(-4 + 3), pi~(x) / pi~(y) = e^(-2 + 2.5): log ratio -0.5
    decision = correction.decide(-3.0, _move(2.0, 2.5), evaluate, np.random.default_rng(0))
    assert decision.energy_change == pytest.approx(0.5)
    assert decision.accept == pytest.approx(np.exp(-0.5))
    assert len(evaluated) == 1
    # kinetic energies play no part: the first stage already accounted for them
    other = _move(2.0, 2.5)._replace(start_kinetic=10.0)
    assert correction.decide(-3.0, other, evaluate, np.random.default_rng(0)) == decision


def test_a_move_that_stayed_is_kept_without_an_exact_evaluation():
    correction = DelayedAcceptance(1000.0)
    rng = np.random.default_rng(0)
    decision = correction.decide(-3.0, _move(2.0, 2.0, index=0), pytest.fail, rng)
    assert decision.accept == 1.0 and not decision.accepted and decision.end is None


def test_the_correction_draws_one_uniform_whatever_happens():
    correction = DelayedAcceptance(1000.0)
    cases = [
        (_move(2.0, 2.5), lambda q: Evaluation(q, -4.0)),
        (_move(2.0, 2.0, index=0), pytest.fail),
        (_move(2.0, 2.5)._replace(failed=True), pytest.fail),
        (_move(2.0, 2.5), lambda q: Evaluation(q, -np.inf)),
    ]
    for move, evaluate in cases:
        rng = np.random.default_rng(7)
        correction.decide(-3.0, move, evaluate, rng)
        reference = np.random.default_rng(7)
        reference.random()
        assert rng.random() == reference.random()
