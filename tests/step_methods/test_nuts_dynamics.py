"""``dynamics="nuts"``: NUTS trees on the surrogate, corrected by delayed acceptance.

The exactness checks run with the other samplers' (``test_rnshmc_exactness``,
``test_arnshmc``, ``test_rnshmc_posteriordb``) and the protocol suite has an ``RNSHMC-nuts``
case; here are what only these dynamics promise, and their bad input.
"""

import numpy as np
import pytest

from pymc_rnshmc import ARNSHMC, RNSHMC, SparseGridHMC
from tests.models import correlated_normal, independent_normal
from tests.step_methods.helpers import DistortedSurrogate, start_chain


def tuned_step(model, seed: int, tune: int, draws: int):
    """An ``RNSHMC(dynamics="nuts")`` step run through ``tune`` draws; ``(step, point)``.

    Without the safety net, and kept whatever it costs: these tests follow the surrogate's
    trees draw by draw.
    """
    with model:
        step = RNSHMC(exploration_steps=100, dynamics="nuts", safety_net=0.0, weigh_costs=False)
    start_chain(step, seed=seed, tune=tune, draws=draws)
    point = model.initial_point()
    for _ in range(tune):
        point, _ = step.step(point)
    step.stop_tuning()
    return step, point


def test_the_second_stage_uses_the_surrogate_the_tree_followed():
    # After a change of surrogate (as ARNSHMC's refreshes make), the chain's cached U~(x) is
    # the old surrogate's; the ratio must use the new one's, which the tree started from.
    model = correlated_normal()
    step, point = tuned_step(model, seed=3, tune=200, draws=50)
    point, _ = step.step(point)
    distorted = DistortedSurrogate("shifted", 0.7)
    distorted.inner = step.surrogate
    distorted.centre, distorted.scale = step._chain.cache.position, np.ones(2)
    step._warmup.replace_surrogate(distorted)
    assert np.isfinite(step._chain.cache.surrogate_potential)  # the old surrogate's value, cached
    checked = 0
    for _ in range(30):
        start, logp_start = step._chain.cache.position.copy(), step._chain.cache.logp
        point, stats = step.step(point)
        (stats,) = stats
        if stats["n_logp_evals"] == 0 or stats["diverging"]:
            continue
        end = np.concatenate([np.ravel(point[v.name]) for v in model.value_vars])
        proposal = end if stats["accepted"] else None
        if proposal is None:
            continue  # the proposal is not observable when rejected
        expected = (-stats["model_logp"] - float(distorted.potential(end))) - (
            -logp_start - float(distorted.potential(start))
        )
        assert stats["energy_error"] == pytest.approx(expected, rel=1e-9, abs=1e-9)
        checked += 1
    assert checked >= 5


def test_exact_evaluations_are_counted_as_they_happen():
    # one per draw, none for a tree that drew its own start (the ratio is then one)
    step, point = tuned_step(independent_normal(), seed=5, tune=150, draws=300)
    calls = []
    evaluate = step.exact_model.logp
    step.exact_model.logp = lambda q: calls.append(1) or evaluate(q)
    for _ in range(300):
        before = len(calls)
        point, (stats,) = step.step(point)
        assert stats["n_logp_evals"] == len(calls) - before
        assert stats["n_logp_evals"] <= 1
        if stats["n_logp_evals"] == 0:
            assert stats["accept"] == 1 and stats["index_in_trajectory"] == 0


@pytest.mark.parametrize(
    ("step_class", "options", "message"),
    [
        (RNSHMC, {"dynamics": "leapfrog"}, "dynamics must be one of 'hmc', 'nuts'"),
        (RNSHMC, {"dynamics": "nuts", "path_length": 1.0}, "path_length applies to"),
        (ARNSHMC, {"dynamics": None}, "dynamics must be one of"),
        (SparseGridHMC, {"dynamics": "nuts"}, "SparseGridHMC proposes with leapfrog"),
    ],
)
def test_invalid_dynamics_are_refused_with_the_way_out(step_class, options, message):
    with independent_normal(), pytest.raises(ValueError, match=message):
        step_class(**options)


def test_a_surrogate_defined_only_in_a_box_is_refused():
    class BoxOnly(DistortedSurrogate):
        defined_everywhere = False

    with independent_normal(), pytest.raises(ValueError, match="defined everywhere"):
        RNSHMC(surrogate=BoxOnly("shifted", 0.0), dynamics="nuts")
