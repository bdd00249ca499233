"""Chains in lockstep sharing one surrogate: what pm.sample returns, exact, one warm-up, batches."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytest

from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, PooledSurrogate, SparseGridHMC
from pymc_rnshmc.step_methods.evaluators import (
    InProcessEvaluator,
    ProcessEvaluator,
)
from pymc_rnshmc.step_methods.reporting import ALONE_PHASE
from tests.checks import TUNE_KNOWN, assert_moments, posterior_draws, sample_stat
from tests.models import NORMAL_MEAN, NORMAL_SD, correlated_normal, independent_normal
from tests.stationarity import KS_LIMIT, Z_LIMIT, BananaPosterior, compare, push
from tests.step_methods.helpers import DistortedSurrogate, assert_correlated_normal

TUNE, DRAWS, CHAINS = 300, 300, 4


class CountingEvaluator(InProcessEvaluator):
    """Evaluates in this process, in reverse order, and keeps each batch's size."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.draw_batches: list[int] = []

    def explore(self, requests):
        self.draw_batches.append(len(requests))
        return super().explore(requests)

    def evaluate(self, requests):
        self.batches.append(len(requests))
        backwards = [model.evaluate(x, gradient) for model, x, gradient in reversed(requests)]
        return backwards[::-1]


def pooled_run(
    model,
    sampler_class=RNSHMC,
    seed=5,
    evaluator=None,
    share_exploration=False,
    draws=DRAWS,
    **options,
):
    options.setdefault("weigh_costs", False)  # draws that depend on the seed alone
    with model:
        step = sampler_class(**options)
        pooled = PooledSurrogate(step, evaluator=evaluator, share_exploration=share_exploration)
        idata = pm.sample(
            step=pooled,
            tune=TUNE,
            draws=draws,
            chains=CHAINS,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    return idata, pooled


@pytest.fixture(scope="module")
def correlated_run():
    evaluator = CountingEvaluator()
    idata, pooled = pooled_run(correlated_normal(), evaluator=evaluator)
    return idata, pooled, evaluator


def test_returns_what_pm_sample_returns_with_the_samplers_stats(correlated_run):
    idata, _, _ = correlated_run
    assert posterior_draws(idata, "x").shape == (CHAINS, DRAWS, 2)
    assert idata.warmup_posterior["x"].shape[:2] == (CHAINS, TUNE)
    phases = sample_stat(idata, "phase")
    assert (phases == 1).mean() > 0.8, "kept draws are surrogate draws"
    assert (sample_stat(idata, "n_logp_evals")[phases == 1] == 1).all()


def test_the_chains_share_one_warm_up_and_its_kernel(correlated_run):
    _, pooled, _ = correlated_run
    chains = pooled._pool.chains
    assert len(chains) == CHAINS
    assert all(chain.warmup is chains[0].warmup for chain in chains)
    # every chain makes its first kept draw untuned, with the frozen kernel
    assert [chain.log.tuning_draws for chain in chains] == [TUNE] * CHAINS
    # the fits saw every chain's exploration (the record itself goes when tuning ends)
    warmup = chains[0].warmup
    assert warmup.fitted_rows[1] >= CHAINS * warmup.start.exploration_length()
    assert len({id(chain.explorer) for chain in chains}) == CHAINS, "each chain its own NUTS"


def test_each_rounds_exact_work_comes_in_batches(correlated_run):
    idata, _, evaluator = correlated_run
    assert max(evaluator.batches) == CHAINS
    # while exploring every chain draws exactly in each round: one batch of all of them
    assert evaluator.draw_batches[:10] == [CHAINS] * 10
    surrogate_rounds = (sample_stat(idata, "phase") == 1).sum(axis=0)
    assert sum(evaluator.batches) >= surrogate_rounds.sum()


def test_pooled_moves_on_the_surrogate_alone_send_nothing_to_the_evaluator(correlated_run):
    idata, _, evaluator = correlated_run
    phase = np.asarray(idata.warmup_sample_stats["phase"].values)
    logps = np.asarray(idata.warmup_sample_stats["n_logp_evals"].values)
    alone = phase == ALONE_PHASE
    assert alone.any() == TUNE_KNOWN, "PyMC 5 does not tell the step when tuning ends"
    assert np.all(logps[alone] == 0)
    # the batches hold only moves with an exact test (surrogate draws, phase 1)
    tested = (phase == 1).sum() + (sample_stat(idata, "phase") == 1).sum()
    assert sum(evaluator.batches) <= tested


def test_the_pooled_chains_are_exact(correlated_run):
    idata, _, _ = correlated_run
    assert_correlated_normal(idata, "pooled RNSHMC")


def test_chains_sharing_the_exploration_explore_less_each_and_stay_exact():
    idata, pooled = pooled_run(correlated_normal(), share_exploration=True)
    warmup = pooled._pool.chains[0].warmup
    assert warmup.start.exploration_length() == 50  # one chain alone: 20 % of 300 tuning draws, 60
    phases = sample_stat(idata, "phase")
    assert (phases == 1).mean() > 0.8
    assert_correlated_normal(idata, "pooled RNSHMC sharing its exploration")


def test_the_pooled_frozen_kernel_leaves_the_banana_invariant():
    """tests/stationarity.py's check on the pooled chains' one kernel, frozen after tuning.

    Chain 0's adapter (``hooks``) applies the pooled warm-up's frozen kernel, safety net
    included; 600 exact banana draws pushed through 1 and 3 of its transitions stay exact.
    """
    banana = BananaPosterior()
    model = banana.model()
    with model:
        pooled = PooledSurrogate(RNSHMC(weigh_costs=False), share_exploration=True)
        pm.sample(
            step=pooled,
            tune=500,
            draws=5,
            chains=2,
            cores=1,
            random_seed=11,
            progressbar=False,
            compute_convergence_checks=False,
        )
    kernel = pooled._pool.hooks[0]
    assert pooled._pool.chains[0].phase == "surrogate"
    rng = np.random.default_rng(12)
    starts, reference = banana.sample(600, rng), banana.sample(600, rng)
    pushed = push(kernel, model, starts, k_values=(1, 3))
    for k in (1, 3):
        result = compare(pushed.draws[k], banana, reference, starts, k)
        assert result.moved > 0.3, result.summary()
        assert result.max_abs_z < Z_LIMIT and result.ks_pvalue > KS_LIMIT, result.summary()


def test_a_deliberately_wrong_surrogate_still_gives_the_posterior():
    # twice the draws: the four chains refit the wrong surrogate on what they learned, and its
    # trajectories, chosen on it, mix the exact posterior less well (with 4 x 300 draws, the
    # least bulk ESS of the three coordinates was 46-299 over seeds 1-9; the check needs 150)
    model = independent_normal()
    wrong = DistortedSurrogate("shifted", 0.5)
    idata, _ = pooled_run(model, surrogate=wrong, seed=9, draws=2 * DRAWS)
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i], NORMAL_SD[i], f"x[{i}]", min_ess=150)


def test_one_chain_sends_its_grids_nodes_to_the_evaluator():
    def run(evaluator):
        with correlated_normal():
            step = PooledSurrogate(SparseGridHMC(weigh_costs=False), evaluator=evaluator)
            return pm.sample(
                step=step,
                tune=TUNE,
                draws=100,
                chains=1,
                cores=1,
                random_seed=3,
                progressbar=False,
                compute_convergence_checks=False,
            )

    evaluator = CountingEvaluator()  # in reverse order
    idata = run(evaluator)
    assert max(evaluator.batches) > 1  # the nodes, as one batch
    here = run(InProcessEvaluator())
    np.testing.assert_array_equal(posterior_draws(idata, "x"), posterior_draws(here, "x"))


class SlowWorkers(InProcessEvaluator):
    """Evaluates here, and reports each request as half a second of a worker's work."""

    def explore(self, requests):
        return [draw._replace(seconds=0.5) for draw in super().explore(requests)]

    def evaluate(self, requests):
        return [evaluation._replace(seconds=0.5) for evaluation in super().evaluate(requests)]


def test_each_chain_is_charged_its_own_work_wherever_it_ran():
    # not the batch's wall time shared among the chains: that would fall with more workers
    _, pooled = pooled_run(correlated_normal(), evaluator=SlowWorkers(), weigh_costs=True)
    exact = np.asarray(pooled._pool.warmup.economy.costs.exact)
    assert exact.size > 0 and np.all(exact >= 0.5) and np.median(exact) < 0.6


def test_an_evaluator_measures_each_requests_own_work():
    with correlated_normal():
        sampler = RNSHMC()
    position, evaluator = sampler.exact_model.initial_position, InProcessEvaluator()
    evaluator.evaluate([(sampler.exact_model, position, True)])  # compiles (about 1 s, Numba)
    evaluations = evaluator.evaluate([(sampler.exact_model, position, True)] * 2)
    assert all(0 < evaluation.seconds < 1 for evaluation in evaluations)


def test_the_draws_depend_on_the_seed_not_on_how_the_batch_is_evaluated(correlated_run):
    idata, _, _ = correlated_run
    again, _ = pooled_run(correlated_normal(), evaluator=InProcessEvaluator())
    np.testing.assert_array_equal(posterior_draws(again, "x"), posterior_draws(idata, "x"))


def test_riemannian_chains_pool_too():
    idata, _ = pooled_run(correlated_normal(), RNSRMHMC, exploration_steps=60)
    assert_correlated_normal(idata, "RNSRMHMC", min_ess=100)


def test_a_sparse_grids_nodes_go_to_the_evaluator_as_one_batch():
    evaluator = CountingEvaluator()  # in reverse order
    idata, pooled = pooled_run(
        correlated_normal(), SparseGridHMC, evaluator=evaluator, exploration_steps=60
    )
    assert_correlated_normal(idata, "SparseGridHMC", min_ess=100)
    nodes = pooled._pool.warmup.surrogate.report.n_points
    assert max(evaluator.batches) > CHAINS and sum(evaluator.batches) > nodes
    again, _ = pooled_run(correlated_normal(), SparseGridHMC, exploration_steps=60)
    np.testing.assert_array_equal(posterior_draws(again, "x"), posterior_draws(idata, "x"))


def test_a_model_without_gradients_pools_its_values():
    idata, pooled = pooled_run(correlated_normal(gradient=False))
    assert pooled._pool.chains[0].warmup.settings.values_only
    assert_correlated_normal(idata, "pooled gradient-free RNSHMC", min_ess=100)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ARNSHMC(), "online estimator"),
        (lambda: SparseGridHMC(exact_acceptance=False), "approximate"),
        (lambda: "NUTS", "configured surrogate sampler"),
    ],
)
def test_samplers_that_cannot_share_a_warm_up_are_refused(make, match):
    with correlated_normal():
        sampler = make()
        with pytest.raises((ValueError, TypeError), match=match):
            PooledSurrogate(sampler)


def test_a_sampler_of_some_variables_only_is_refused():
    with pm.Model():
        x = pm.Normal("x", shape=2)
        pm.Normal("y")
        sampler = RNSHMC(vars=[x])
        with pytest.raises(ValueError, match="all of the model's free variables"):
            PooledSurrogate(sampler)


def test_worker_processes_give_the_same_draws(correlated_run):
    idata, _, _ = correlated_run
    evaluator = ProcessEvaluator(workers=2)
    try:
        again, pooled = pooled_run(correlated_normal(), evaluator=evaluator)
    finally:
        evaluator.close()
    # after tuning the workers' chains streamed (draw_stream), the in-process ones did not
    assert pooled._pool.stream is not None and correlated_run[1]._pool.stream is None
    np.testing.assert_array_equal(posterior_draws(again, "x"), posterior_draws(idata, "x"))


def test_a_shared_exploration_streamed_on_workers_gives_the_in_process_draws():
    # the chains explore out of step; the record is filled in lockstep order before the fit
    in_process, _ = pooled_run(correlated_normal(), share_exploration=True)
    evaluator = ProcessEvaluator(workers=2)
    try:
        streamed, _ = pooled_run(correlated_normal(), evaluator=evaluator, share_exploration=True)
    finally:
        evaluator.close()
    np.testing.assert_array_equal(posterior_draws(streamed, "x"), posterior_draws(in_process, "x"))


def test_with_cores_above_one_pymc_steps_the_pooled_chains_in_turn():
    # PyMC would pickle population steps into one process each; refused, it steps them here
    def run(cores):
        with correlated_normal():
            return pm.sample(
                step=PooledSurrogate(RNSHMC(weigh_costs=False)),
                tune=100,
                draws=20,
                chains=2,
                cores=cores,
                progressbar=False,
                random_seed=1,
                compute_convergence_checks=False,
            )

    np.testing.assert_array_equal(posterior_draws(run(2), "x"), posterior_draws(run(1), "x"))


# A Dask cluster's draws equal the in-process ones: tests/step_methods/test_evaluator_faults.py,
# with one of its workers killed mid-run.


def test_float32_chains_on_workers_make_the_in_process_draws_at_one_logp_each():
    # Workers run each task under the sampler's floatX: PyMC 5's NUTS on a worker (default
    # float64) drew other exploring draws. After tuning the stream starts a chain's next draw
    # from its last one, in the model's dtype, or the cached logp would not match.
    def run(evaluator):
        try:
            with pytensor.config.change_flags(floatX="float32"):
                return pooled_run(independent_normal(), evaluator=evaluator)
        finally:
            if hasattr(evaluator, "close"):
                evaluator.close()

    in_process, _ = run(InProcessEvaluator())
    streamed, pooled = run(ProcessEvaluator(workers=2))
    assert pooled._pool.stream is not None
    draws = posterior_draws(streamed, "x")
    assert draws.dtype == np.float32
    np.testing.assert_array_equal(draws, posterior_draws(in_process, "x"))
    surrogate = sample_stat(streamed, "used_surrogate").astype(bool)
    assert (sample_stat(streamed, "n_logp_evals")[surrogate] <= 1).all()
