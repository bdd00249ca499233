"""Every sampler follows PyMC's step-method protocol: stats, state, seeds, processes, pickling."""

import pickle

import cloudpickle
import numpy as np
import pymc as pm
import pytensor
import pytest
from pymc.step_methods.compound import Competence

from pymc_rnshmc.step_methods.reporting import SURROGATE_HMC_STATS
from pymc_rnshmc.workloads import logistic_regression
from tests.checks import posterior_draws, sample_stat
from tests.models import independent_normal
from tests.step_methods.conftest import DRAWS, TUNE
from tests.step_methods.helpers import start_chain


def sample_one_chain(step, draws: int, seed: int, tune: int = TUNE, **options):
    """``pm.sample`` of one quiet chain with ``step`` (inside a model context)."""
    return pm.sample(
        step=step,
        tune=tune,
        draws=draws,
        chains=1,
        random_seed=seed,
        progressbar=False,
        compute_convergence_checks=False,
        **options,
    )


def sample(model, case, **kwargs):
    options = {
        "tune": TUNE,
        "draws": DRAWS,
        "chains": 2,
        "cores": 1,
        "random_seed": 11,
        "progressbar": False,
        "compute_convergence_checks": False,
    }
    options.update(kwargs)
    with model:
        return pm.sample(step=case.make(), **options)


@pytest.fixture(scope="module")
def model(sampler):
    return independent_normal(gradient=not sampler.black_box)


@pytest.fixture(scope="module")
def sequential_run(model, sampler):
    return sample(model, sampler, discard_tuned_samples=False)


def test_returns_what_pm_sample_returns_with_declared_stats(sequential_run, sampler):
    idata = sequential_run
    assert {"posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"} <= set(
        idata.groups() if callable(getattr(idata, "groups", None)) else idata.children
    )
    stats = idata.sample_stats
    declared = sampler.stats
    expected = {"lp" if k == "model_logp" else k for k in declared} - {"warning"}
    assert expected <= set(stats.data_vars)
    for name in expected:
        dtype = declared["model_logp" if name == "lp" else name][0]
        assert np.dtype(stats[name].dtype) == np.dtype(dtype), name
    assert posterior_draws(idata, "x").shape == (2, DRAWS, 3)


def test_draws_after_tuning_cost_one_logp(sequential_run, sampler):
    idata = sequential_run
    surrogate, net = sample_stat(idata, "used_surrogate"), sample_stat(idata, "safety_net")
    assert (surrogate ^ net).all()  # a surrogate draw, or the safety net's exact one
    assert net.any() == sampler.black_box  # on by default without gradients only
    depth = sample_stat(idata, "tree_depth")
    gradients = sample_stat(idata, "n_gradient_evals")
    logps = sample_stat(idata, "n_logp_evals")
    stayed = sample_stat(idata, "index_in_trajectory") == 0
    if sampler.nuts:  # a tree that drew its own start costs no exact evaluation
        assert (depth >= 1).all()
        assert (sample_stat(idata, "n_steps") <= 2**depth - 1).all()
        assert (gradients == 0).all()
        assert (logps[~stayed] == 1).all() and (logps[stayed] <= 1).all()
        assert (sample_stat(idata, "accept")[logps == 0] == 1).all()
        surrogate_accept = sample_stat(idata, "surrogate_accept")
        assert ((surrogate_accept > 0) & (surrogate_accept <= 1)).all()
    elif sampler.gradient_free_draws:
        assert (depth == 0).all()
        assert (gradients == 0).all()
        assert (logps == 1).all()
    else:  # exact gradients only where trajectories leave the box, each counted
        assert (depth == 0).all()
        outside = sample_stat(idata, "steps_outside_domain")
        np.testing.assert_array_equal(gradients, outside)
        np.testing.assert_array_equal(logps, 1 + outside)
    accept = sample_stat(idata, "accept")
    assert 0.5 < accept[surrogate].mean() <= 1.0
    errors = sample_stat(idata, "surrogate_error")
    if sampler.nuts:  # free with a tree: on every draw that evaluated the target
        assert np.isfinite(errors[logps == 1]).all()
    else:
        assert np.isfinite(errors[:, ::10][surrogate[:, ::10]]).all()  # TUNE % 10 == 0
    # a net draw that moved carries the wall it crossed (step_methods/wall_watch.py)
    moved = sample_stat(idata, "accepted") == 1.0
    assert np.isnan(errors[net & ~moved]).all()
    if (net & moved).any():
        assert np.isfinite(errors[net & moved]).mean() > 0.9


def test_each_sequential_chain_explores_and_fits_its_own_surrogate(sequential_run, sampler):
    warmup = sequential_run.warmup_sample_stats
    used = np.asarray(warmup["used_surrogate"].values)
    gradients = np.asarray(warmup["n_gradient_evals"].values)
    explored = sampler.exploration
    for chain in range(2):
        assert not used[chain, :explored].any(), "a chain started from another's surrogate"
        if sampler.black_box:  # a random walk: one logp a draw, never a gradient
            assert (gradients[chain] == 0).all()
            assert (np.asarray(warmup["n_logp_evals"].values)[chain, 1:explored] == 1).all()
        else:
            assert (gradients[chain, :explored] > 0).all()
        assert used[chain, explored:].all()


def test_same_seed_same_draws_sequential_and_parallel(model, sampler, sequential_run):
    reference = posterior_draws(sequential_run, "x")
    again = posterior_draws(sample(model, sampler, discard_tuned_samples=False), "x")
    np.testing.assert_array_equal(again, reference)
    parallel = posterior_draws(sample(model, sampler, cores=2), "x")
    np.testing.assert_array_equal(parallel, reference)
    assert not np.array_equal(reference[0], reference[1])


def test_spawned_workers_sample_the_same_chains(model, sampler, sequential_run):
    reference = posterior_draws(sequential_run, "x")
    spawned = posterior_draws(sample(model, sampler, cores=2, mp_ctx="spawn"), "x")
    np.testing.assert_array_equal(spawned, reference)


def test_other_seed_other_draws(model, sampler, sequential_run):
    other = posterior_draws(sample(model, sampler, random_seed=12), "x")
    assert not np.array_equal(other, posterior_draws(sequential_run, "x"))


@pytest.mark.parametrize("phase", ["exploration", "surrogate"])
def test_sampling_state_round_trip_reproduces_the_next_steps(model, sampler, phase):
    with model:
        step = sampler.make()
    start_chain(step, seed=3, tune=TUNE, draws=DRAWS)
    point = model.initial_point()
    for _ in range(5 if phase == "exploration" else sampler.exploration + 5):
        point, _ = step.step(point)
    assert step.phase == phase
    state = step.sampling_state
    first = [step.step(point) for _ in range(3)]
    step.sampling_state = state
    second = [step.step(point) for _ in range(3)]
    timings = {"perf_counter_diff", "process_time_diff", "perf_counter_start", "warning"}
    for (point_a, stats_a), (point_b, stats_b) in zip(first, second, strict=True):
        np.testing.assert_array_equal(point_a["x"], point_b["x"])
        for key in stats_a[0].keys() - timings:  # ARNSHMC: refreshes and estimator points too
            np.testing.assert_equal(stats_a[0][key], stats_b[0][key], err_msg=key)


@pytest.mark.parametrize("when", ["before sampling", "in the surrogate phase"])
def test_pickles_and_samples_after_unpickling(model, sampler, when):
    # PyMC ships steps to spawned workers with cloudpickle (its own NUTS needs it too); the
    # worker then drives step() directly, as here.
    tune, draws = sampler.exploration + 40, 20
    with model:
        step = sampler.make()
    start_chain(step, seed=5, tune=tune, draws=draws)
    point, done = model.initial_point(), 0
    if when == "in the surrogate phase":
        done = sampler.exploration + 5
        for _ in range(done):
            point, _ = step.step(point)
        assert step.phase == "surrogate"
    clone = pickle.loads(cloudpickle.dumps(pickle.loads(cloudpickle.dumps(step))))
    for draw in range(done, tune + draws):
        if draw == tune:
            clone.stop_tuning()
        point, stats = clone.step(point)
    assert stats[0]["used_surrogate"]
    assert np.all(np.isfinite(point["x"]))


def test_competence_is_compatible_but_never_preferred(model, sampler):
    continuous = model["x"]
    step_class = sampler.step_class
    assert step_class.competence(continuous, True) == Competence.COMPATIBLE
    assert step_class.competence(continuous, False) == Competence.COMPATIBLE  # gradient-free
    with pm.Model():
        coin = pm.Bernoulli("coin", 0.5)
    assert step_class.competence(coin, False) == Competence.INCOMPATIBLE


def test_progress_bar_runs(model, sampler):
    with model:
        pm.sample(
            step=sampler.make(exploration_steps=60),
            tune=80,
            draws=10,
            chains=1,
            progressbar=True,
            random_seed=2,
            compute_convergence_checks=False,
        )


def test_the_phase_stat_and_the_progress_bar_say_what_the_chain_does(sequential_run, sampler):
    from pymc_rnshmc.step_methods.reporting import ALONE_PHASE, PHASES, progressbar_update

    warmup = sequential_run.warmup_sample_stats
    phase = np.asarray(warmup["phase"].values)
    used = np.asarray(warmup["used_surrogate"].values)
    assert np.isin(phase[used], (1, ALONE_PHASE)).all()
    assert (phase[:, : sampler.exploration] == 0).all()
    kept = sample_stat(sequential_run, "phase")
    net = sample_stat(sequential_run, "safety_net")
    assert (kept[net] == 2).all() and (
        kept[sample_stat(sequential_run, "used_surrogate")] == 1
    ).all()
    stats = {
        name: np.asarray(sequential_run.sample_stats[name].values)[0, -1]
        for name in (
            "divergences",
            "step_size",
            "n_gradient_evals",
            "n_logp_evals",
            "accept",
            "phase",
        )
    }
    fields = progressbar_update(stats)
    assert fields["phase"] == PHASES[int(kept[0, -1])]
    assert 0.0 <= fields["accept"] <= 1.0


def test_random_variables_are_accepted_as_vars_and_ordered_like_the_model(sampler):
    with pm.Model():
        first = pm.Normal("first", 0.0, 1.0, shape=2)
        second = pm.Normal("second", 5.0, 0.1)
        step = sampler.make(vars=[second, first], exploration_steps=100)
        idata = pm.sample(
            step=step,
            tune=200,
            draws=300,
            chains=1,
            random_seed=4,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert [v.name for v in step.vars] == ["first", "second"]
    assert abs(posterior_draws(idata, "second").mean() - 5.0) < 0.05
    assert abs(posterior_draws(idata, "first").mean()) < 0.4


def test_samples_beside_pymc_metropolis_on_an_integer_variable(sampler):
    # PyMC gives a model's integer variables to its Metropolis, whose stats share names with
    # ours: PyMC's trace refuses a name with two types (``accepted`` was a bool here).
    model = independent_normal(gradient=not sampler.black_box)
    with model:
        pm.DiscreteUniform("count", 0, 3)
        step = sampler.make()
        idata = sample_one_chain(step, draws=50, seed=12, tune=sampler.exploration + 50)
    assert [v.name for v in step.vars] == ["x"]
    moved = sample_stat(idata, "accepted")
    assert moved.dtype == np.float64 and set(np.unique(moved)) <= {0.0, 1.0}
    counts = posterior_draws(idata, "count")
    assert counts.min() >= 0 and counts.max() <= 3 and len(np.unique(counts)) > 1


def test_samples_beside_pymc_nuts_on_the_variables_it_was_not_given(sampler):
    # ``RNSHMC(vars=[...])`` leaves the model's other continuous variables to PyMC's NUTS, whose
    # stats share names with ours: ``divergences`` was an np.int64 here, an int there.
    model = independent_normal(gradient=not sampler.black_box)
    with model:
        other = pm.Normal("other", 2.0, 0.5)
        step = sampler.make(vars=[model["x"]])
        idata = sample_one_chain(
            [step, pm.NUTS([other])], draws=100, seed=13, tune=sampler.exploration + 50
        )
    assert [v.name for v in step.vars] == ["x"]
    assert abs(posterior_draws(idata, "other").mean() - 2.0) < 0.25
    assert sample_stat(idata, "phase").size > 0


def test_stats_shared_with_pymc_nuts_and_metropolis_have_their_types():
    for pymc_stats in (pm.NUTS.stats_dtypes_shapes, pm.Metropolis.stats_dtypes_shapes):
        for name in set(pymc_stats) & set(SURROGATE_HMC_STATS):
            assert SURROGATE_HMC_STATS[name][0] == pymc_stats[name][0], name


def test_a_float32_model_pays_one_exact_logp_per_draw(sampler):
    # The chain holds float32 points: a proposal evaluated and cached in float64 never matched
    # the next draw's start, which then paid a second logp (1.98 per draw measured).
    with pytensor.config.change_flags(floatX="float32"):
        model = independent_normal(gradient=not sampler.black_box)
        with model:
            step = sampler.make()
            idata = sample_one_chain(step, draws=100, seed=6)
    assert step.dtype == "float32"
    assert posterior_draws(idata, "x").dtype == np.float32
    outside = sample_stat(idata, "n_gradient_evals")  # exact forces (grid: outside its box)
    logps = sample_stat(idata, "n_logp_evals")
    if sampler.nuts:  # a tree that drew its own start needs no evaluation
        moved = sample_stat(idata, "index_in_trajectory") != 0
        assert (logps <= 1).all() and (logps[moved] == 1).all()
    else:
        np.testing.assert_array_equal(logps, 1 + outside)


def test_a_step_object_reused_for_a_second_call_gives_the_same_draws(model, sampler):
    # The second call used to explore with the first call's surrogate dual averaging.
    with model:
        fresh = sample_one_chain(sampler.make(), draws=50, seed=8)
        step = sampler.make()
        sample_one_chain(step, draws=50, seed=8)
        reused = sample_one_chain(step, draws=50, seed=8)
    np.testing.assert_array_equal(posterior_draws(reused, "x"), posterior_draws(fresh, "x"))


def test_a_reused_step_samples_the_data_set_between_its_calls(sampler):
    # the exact model reads pm.Data's shared values, and the first call's surrogate is not kept
    if sampler.black_box or "coarse" in sampler.options:
        pytest.skip("the black box and the coarse model hold their own data")
    with pm.Model():
        observed = pm.Data("observed", np.zeros(20))
        pm.Normal("y", pm.Normal("mu", 0.0, 10.0), 1.0, observed=observed)
        step = sampler.make()
        first = sample_one_chain(step, draws=DRAWS, seed=3)
        pm.set_data({"observed": np.full(20, 5.0)})
        second = sample_one_chain(step, draws=DRAWS, seed=3)
    # posterior means 0 and 4.99, standard deviation 0.22
    assert abs(posterior_draws(first, "mu").mean()) < 0.5
    assert abs(posterior_draws(second, "mu").mean() - 4.99) < 0.5


def test_a_multitrace_and_the_callback_carry_the_declared_stats(model, sampler):
    draws = []
    with model:
        trace = sample_one_chain(
            sampler.make(),
            draws=20,
            seed=4,
            return_inferencedata=False,
            callback=lambda trace, draw: draws.append(draw),
        )
    declared = set(sampler.stats) - {"warning"}
    assert len(trace) == 20 and declared <= set(trace.stat_names)
    assert [draw.tuning for draw in draws] == [True] * TUNE + [False] * 20
    assert all(declared <= set(draw.stats[0]) for draw in draws)
    assert {int(draw.stats[0]["phase"]) for draw in draws[-20:]} <= {1, 2, 3}


def test_set_rng_starts_a_chain_on_both_pymc_generations(model, sampler):
    # PyMC 6 replaced set_rng with setup_chain; a user's set_rng call must still work.
    with model:
        step = sampler.make()
    step.set_rng(np.random.default_rng(3))
    point = model.initial_point()
    for _ in range(sampler.exploration + 5):
        point, stats = step.step(point)
    assert step.phase == "surrogate" and stats[0]["used_surrogate"]


def test_eigenvalue_stats_describe_the_metric_the_surrogate_draws_use(model, sampler):
    with model:
        step = sampler.make()
        idata = sample_one_chain(step, draws=20, seed=9)
    surrogate = sample_stat(idata, "used_surrogate")  # the net's exact draws report their own
    largest, smallest = sample_stat(idata, "largest_eigval"), sample_stat(idata, "smallest_eigval")
    geometry = step.trajectory_choice.best.metric
    if hasattr(geometry, "at"):  # a position-dependent metric: G^-1 at each draw's start
        positions = posterior_draws(idata, "x")[0]
        surrogate, largest, smallest = surrogate[0], largest[0], smallest[0]
        for index in np.flatnonzero(surrogate[1:]) + 1:
            expected = geometry.at(positions[index - 1]).eigenvalue_range()
            np.testing.assert_allclose([smallest[index], largest[index]], expected, rtol=1e-10)
        return
    covariance = getattr(geometry, "covariance", None)
    if covariance is None:
        covariance = np.diag(geometry.variances)
    eigenvalues = np.linalg.eigvalsh(covariance)
    np.testing.assert_allclose(largest[surrogate], eigenvalues[-1], rtol=1e-10)
    np.testing.assert_allclose(smallest[surrogate], eigenvalues[0], rtol=1e-10)


def test_after_tuning_the_diagnostic_surrogate_potential_is_evaluated_on_every_tenth_draw(
    model, sampler
):
    # It only serves the surrogate_error stat and costs about a leapfrog step: evaluating it
    # on every draw made each draw a step longer than needed. A NUTS tree knows it anyway.
    if sampler.nuts:
        pytest.skip("a NUTS tree evaluates U~ at every step; surrogate_error is free")
    with model:
        step = sampler.make()
    start_chain(step, seed=4, tune=TUNE, draws=100)
    point = model.initial_point()
    for _ in range(TUNE):
        point, _ = step.step(point)
    step.stop_tuning()
    calls = []
    surrogate_potential = step.surrogate.potential
    step.surrogate.potential = lambda q: calls.append(1) or surrogate_potential(q)
    errors, surrogate = [], []
    for _ in range(100):
        point, stats = step.step(point)
        errors.append(stats[0]["surrogate_error"])
        surrogate.append(stats[0]["used_surrogate"])
    errors, surrogate = np.array(errors), np.array(surrogate)
    # without gradients, every leapfrog draw also checks its surrogate energy (one U~); a net
    # draw measures the wall it crossed (two)
    net_calls = 2 * np.sum(~surrogate)
    assert len(calls) <= (120 if sampler.black_box else 20) + net_calls
    assert np.isfinite(errors[::10][surrogate[::10]]).all()
    assert np.isnan(errors[1::10][surrogate[1::10]]).all()


def test_draw_times_cover_the_sampling_loop(sampler):
    # Every piece of per-draw work (the fit, the choice of the dynamics, ARNSHMC's learning and
    # refreshes) is inside the draws' perf_counter_diff; it covered 27-76 % of the loop before.
    # PyMC's own loop costs tens of microseconds a draw, outside any step's timer: the model is
    # expensive enough for that to stay a small share on a loaded machine.
    with logistic_regression(n_obs=100_000, dim=10):
        idata = pm.sample(
            step=sampler.make(exploration_steps=100),
            tune=180,
            draws=100,
            chains=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )
    timed = sample_stat(idata, "perf_counter_diff").sum()
    timed += np.asarray(idata.warmup_sample_stats["perf_counter_diff"].values).sum()
    assert timed >= 0.95 * float(idata.posterior.attrs["sampling_time"])
