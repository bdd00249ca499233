import numpy as np
import pytest

from pymc_rnshmc.hmc.acceptance import metropolis_accept
from pymc_rnshmc.surrogates.training import TrainingBuffer


@pytest.mark.parametrize("change", [np.nan, np.inf])
def test_non_finite_energy_change_is_rejected(change):
    rng = np.random.default_rng(0)
    assert metropolis_accept(change, rng) == (0.0, False)


def test_acceptance_probability_and_frequency():
    rng = np.random.default_rng(1)
    assert metropolis_accept(-3.0, rng) == (1.0, True)
    decisions = [metropolis_accept(np.log(2.0), rng) for _ in range(20000)]
    assert decisions[0][0] == pytest.approx(0.5)
    assert abs(np.mean([accepted for _, accepted in decisions]) - 0.5) < 0.02


def test_one_uniform_per_call_whatever_the_outcome():
    first, second = np.random.default_rng(2), np.random.default_rng(2)
    metropolis_accept(np.nan, first)
    metropolis_accept(0.3, second)
    assert first.random() == second.random()


def test_training_buffer_grows_and_windows():
    buffer = TrainingBuffer(dim=2, capacity=2)
    for i in range(9):
        buffer.append(np.array([i, -i]), float(i), np.array([1.0, 2.0]) * i)
    assert len(buffer) == 9
    positions, potentials, gradients = buffer.window(6)
    np.testing.assert_array_equal(positions, [[6, -6], [7, -7], [8, -8]])
    np.testing.assert_array_equal(potentials, [6.0, 7.0, 8.0])
    np.testing.assert_array_equal(gradients[:, 1], [12.0, 14.0, 16.0])
    positions[0, 0] = 99.0  # a copy, not a view
    assert buffer.window(6)[0][0, 0] == 6
    buffer.clear()
    assert len(buffer) == 0
