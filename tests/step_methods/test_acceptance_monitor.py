"""The warning after tuning when acceptance is poor: which error, and what to try."""

import warnings

import numpy as np
import pytest

from pymc_rnshmc import RNSHMC, SparseGridHMC, SurrogateWarning
from pymc_rnshmc.step_methods.acceptance_monitor import AcceptanceMonitor
from tests.models import correlated_normal
from tests.step_methods.helpers import DistortedSurrogate, sample_with


def judge(accept, integrator, error=0.5, draws=20):
    monitor = AcceptanceMonitor("RNSHMC", draws=draws)
    messages = [monitor.record(accept, integrator, error) for _ in range(2 * draws)]
    assert all(message is None for message in messages[: draws - 1] + messages[draws:])
    return messages[draws - 1]


def test_a_wrong_surrogate_is_named_with_its_error():
    message = judge(accept=0.1, integrator=0.95, error=-3.0)
    assert "surrogate is wrong where the chain goes" in message
    assert "median |surrogate error| 3 nats" in message and "n_hidden" in message


def test_the_remedy_names_the_samplers_own_setting():
    with correlated_normal():
        step = SparseGridHMC()
    monitor = step._chain.acceptance_monitor
    messages = [monitor.record(0.1, 0.95, 2.0) for _ in range(monitor.draws)]
    assert "max_points" in messages[-1] and "n_hidden" not in messages[-1]


def test_a_step_too_large_is_named_with_the_integrators_acceptance():
    message = judge(accept=0.1, integrator=0.3)
    assert "step size is too large" in message and "acceptance 0.30 there" in message


def test_good_acceptance_says_nothing_and_missing_values_count_as_rejections():
    assert judge(accept=0.8, integrator=np.nan) is None
    assert "surrogate is wrong" in judge(accept=np.nan, integrator=np.nan, error=np.nan)


def test_the_sampler_warns_once_per_chain_after_tuning_with_a_wrong_surrogate():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sample_with(
            RNSHMC,
            correlated_normal(),
            tune=400,
            draws=300,
            seed=7,
            surrogate=DistortedSurrogate("shifted", 1.5),
            refit_during_tuning=False,
            safety_net=0.0,  # the surrogate's own kernel: the net's exact draws would help it
        )
    messages = [
        str(w.message)
        for w in caught
        if issubclass(w.category, SurrogateWarning) and "after tuning" in str(w.message)
    ]
    assert len(messages) == 2  # one per chain
    assert all("surrogate is wrong where the chain goes" in message for message in messages)


@pytest.mark.parametrize("draws", [200])
def test_a_good_surrogate_gives_no_warning(draws):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sample_with(RNSHMC, correlated_normal(), tune=400, draws=draws, seed=8)
    assert not any("after tuning was" in str(w.message) for w in caught)
