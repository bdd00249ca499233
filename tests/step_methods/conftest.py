"""The samplers every step-method protocol test runs over, with settings that reach each phase.

Each entry builds a step for a short run (``TUNE`` tuning draws, ``DRAWS`` kept) whose exact
exploration ends after ``exploration`` draws, so tests can tell the phases apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, SparseGridHMC
from pymc_rnshmc.step_methods.arnshmc import ADAPTIVE_SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.step_methods.rnsrmhmc import RIEMANNIAN_STATS
from pymc_rnshmc.step_methods.sparse_grid_hmc import SPARSE_GRID_HMC_STATS
from tests.step_methods.helpers import WrongCoarseModel

TUNE, DRAWS = 300, 200


@dataclass(frozen=True)
class SamplerCase:
    """A sampler class with the options of the protocol tests and what it promises."""

    step_class: type
    exploration: int
    stats: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    gradient_free_draws: bool = True
    """After tuning, no draw spends an exact gradient (a grid's box may be left: not so)."""
    black_box: bool = False
    """The protocol tests' model hides its gradient (explored by a random walk, values only)."""

    @property
    def nuts(self) -> bool:
        """Surrogate draws are NUTS trees, corrected by delayed acceptance."""
        return self.options.get("dynamics") == "nuts"

    def make(self, **overrides):
        """The step, with the safety net off for a model with gradients unless overridden.

        The protocol tests check the surrogate kernel's citizenship draw by draw; the net's
        exact NUTS draws are tested in ``test_safety_net.py``, and the samplers as users get
        them (``safety_net=None``) in ``test_stationarity.py``. Without gradients the net was
        always on by default, and stays so here. Costs are not weighed (``weigh_costs``): the
        tests' models are cheap, so measured costs would rightly give some surrogates up for
        exact NUTS (``test_economy.py``), and timings would make the draws depend on more than
        the seed.
        """
        net = {} if self.black_box else {"safety_net": 0.0}
        options = {
            "exploration_steps": self.exploration,
            "weigh_costs": False,
            **net,
            **self.options,
            **overrides,
        }
        return self.step_class(**options)

    @property
    def id(self) -> str:
        return (
            self.step_class.__name__
            + ("-nuts" if self.nuts else "")
            + ("-black-box" if self.black_box else "")
            + ("-coarse" if "coarse" in self.options else "")
        )


SAMPLERS = [
    SamplerCase(RNSHMC, exploration=200, stats=SURROGATE_HMC_STATS),
    SamplerCase(RNSHMC, exploration=200, stats=SURROGATE_HMC_STATS, options={"dynamics": "nuts"}),
    SamplerCase(RNSHMC, exploration=200, stats=SURROGATE_HMC_STATS, black_box=True),
    SamplerCase(
        RNSHMC, exploration=200, stats=SURROGATE_HMC_STATS, options={"coarse": WrongCoarseModel()}
    ),
    SamplerCase(ARNSHMC, exploration=60, stats=ADAPTIVE_SURROGATE_HMC_STATS),
    SamplerCase(RNSRMHMC, exploration=200, stats=RIEMANNIAN_STATS),
    SamplerCase(
        SparseGridHMC, exploration=100, stats=SPARSE_GRID_HMC_STATS, gradient_free_draws=False
    ),
]


@pytest.fixture(params=SAMPLERS, ids=[case.id for case in SAMPLERS], scope="module")
def sampler(request) -> SamplerCase:
    return request.param


SLOW_PROTOCOL_CASES = {
    # spawning workers imports PyMC in each (5-6 s a case); every sampler's pickling is tested
    # in process, and spawning is PyMC's, the same for all
    "test_spawned_workers_sample_the_same_chains": {
        "RNSHMC-nuts",
        "RNSHMC-coarse",
        "ARNSHMC",
        "RNSRMHMC",
        "SparseGridHMC",
    },
    # 14-18 s: the grid's nodes on a 100,000-row model
    "test_draw_times_cover_the_sampling_loop": {"SparseGridHMC"},
}
"""Protocol tests run for a few samplers only in the default suite (all with ``-m slow``)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items) -> None:
    """Mark :data:`SLOW_PROTOCOL_CASES` ``slow`` before ``-m`` selects."""
    for item in items:
        name, _, case = item.name.partition("[")
        if case.rstrip("]") in SLOW_PROTOCOL_CASES.get(name, ()):
            item.add_marker(pytest.mark.slow)
