"""compare_samplers: one call that runs NUTS and surrogate samplers and tabulates them."""

import copy
import sys
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc import RNSHMC, compare_samplers
from pymc_rnshmc.comparison import (
    NUTS_NAME,
    comparison_table,
    coordinate_ess,
    posterior_coordinates,
    run_sampler,
)
from pymc_rnshmc.comparison import compare as compare_module
from pymc_rnshmc.comparison import runs as runs_module
from tests.checks import effective_sample_size, posterior_draws, sample_stat
from tests.models import correlated_normal, independent_normal


@pytest.fixture(scope="module")
def comparison():
    # costs not weighed: on this cheap model timings could hand a chain to exact NUTS, and the
    # counts below are those of surrogate draws
    with independent_normal():
        return compare_samplers(
            samplers={"RNSHMC": lambda: RNSHMC(weigh_costs=False)},
            tune=300,
            draws=300,
            random_seed=3,
            nutpie=False,
            progressbar=False,
        )


def test_the_table_has_a_row_per_sampler_with_the_reference_first(comparison):
    table = comparison.table
    assert list(table.index) == [NUTS_NAME, "RNSHMC"]
    assert comparison.reference == NUTS_NAME
    assert table.loc[NUTS_NAME, "max |dmean| (MCSE)"] == 0.0
    assert 0 < table.loc["RNSHMC", "max |dmean| (MCSE)"] < 4.5  # same posterior


def test_the_ess_columns_are_arviz_ess_of_the_traces(comparison):
    for name, run in comparison.runs.items():
        x = posterior_draws(run.trace, "x")
        bulk = [effective_sample_size(x[..., i], "bulk") for i in range(3)]
        tail = [effective_sample_size(x[..., i], "tail") for i in range(3)]
        row = comparison.table.loc[name]
        assert row["min bulk ESS"] == pytest.approx(min(bulk), rel=1e-12)
        assert row["median bulk ESS"] == pytest.approx(np.median(bulk), rel=1e-12)
        assert row["min tail ESS"] == pytest.approx(min(tail), rel=1e-12)
        assert row["bulk ESS/s (call)"] == pytest.approx(min(bulk) / run.whole_call_seconds)
        assert row["tail ESS/s (draws)"] == pytest.approx(min(tail) / run.draw_seconds)
        assert 0 < run.draw_seconds < run.whole_call_seconds


def test_evaluations_acceptance_and_divergences_come_from_the_stats(comparison):
    table = comparison.table
    rnshmc = comparison.runs["RNSHMC"].trace
    # one logp per surrogate draw; the safety net's exact NUTS draws (a tenth) cost more
    net = sample_stat(rnshmc, "safety_net")
    logps = sample_stat(rnshmc, "n_logp_evals")
    assert (logps[~net] == 1).all()
    assert table.loc["RNSHMC", "logp evals/draw"] == pytest.approx(logps.mean())
    assert table.loc["RNSHMC", "grad evals/draw"] == pytest.approx(
        sample_stat(rnshmc, "n_gradient_evals").mean()
    )
    assert table.loc["RNSHMC", "accept"] == pytest.approx(sample_stat(rnshmc, "accept").mean())
    nuts = comparison.runs[NUTS_NAME].trace
    # PyMC's NUTS evaluates the start of each trajectory again: one more than its steps
    assert table.loc[NUTS_NAME, "grad evals/draw"] == pytest.approx(
        sample_stat(nuts, "n_steps").mean() + 1.0
    )
    assert table.loc[NUTS_NAME, "divergences"] == sample_stat(nuts, "diverging").sum()


def test_the_tuning_is_counted_though_its_draws_are_discarded(comparison):
    for name, run in comparison.runs.items():
        assert not any(g.startswith("warmup_") for g in runs_module._groups(run.trace)), name
        logps, gradients = run.tuning_evaluations
        assert logps >= 2 * 300 and gradients > 0, name  # at least a logp a tuning draw
    logps, gradients = comparison.runs[NUTS_NAME].tuning_evaluations
    assert logps == gradients, "NUTS evaluates logp and gradient together"


def test_evaluations_to_ess_1000_scale_the_kept_draws_and_add_the_tuning(comparison):
    for name, run in comparison.runs.items():
        row = comparison.table.loc[name]
        ess = min(row["min bulk ESS"], row["min tail ESS"])
        kept = row["logp evals/draw"] * 2 * 300  # chains x draws
        expected = run.tuning_evaluations[0] + kept * 1000.0 / ess
        assert row["logps to ESS 1000"] == pytest.approx(expected, rel=1e-9), name
        seconds = run.whole_call_seconds + run.draw_seconds * (1000.0 / ess - 1.0)
        assert row["s to ESS 1000"] == pytest.approx(seconds, rel=1e-9), name
    surrogate = comparison.table.loc["RNSHMC", "logps to ESS 1000"]
    nuts = comparison.table.loc[NUTS_NAME, "logps to ESS 1000"]
    assert surrogate < nuts, "the surrogate's kept draws cost about one logp each"


def test_a_step_that_does_not_count_its_evaluations_gets_nan_not_an_error():
    with independent_normal():
        run = run_sampler(
            pm.Metropolis, tune=50, draws=50, chains=1, random_seed=1, progressbar=False
        )
    row = comparison_table({"Metropolis": run}).loc["Metropolis"]
    assert np.isnan(row["logp evals/draw"]) and np.isnan(row["logps to ESS 1000"])
    assert np.isnan(run.tuning_evaluations[0])


def test_a_run_keeps_its_step_and_the_origin_of_its_clock(comparison):
    assert isinstance(comparison.runs["RNSHMC"].step, RNSHMC)
    assert comparison.runs[NUTS_NAME].step is None  # pm.sample built it
    for run in comparison.runs.values():
        assert run.backend == "pymc"
        start = sample_stat(run.trace, "perf_counter_start")
        ends = start + sample_stat(run.trace, "perf_counter_diff") - run.started
        np.testing.assert_allclose(run.finish_seconds, ends)
        assert "warmup_posterior" not in run.trace  # tuning draws discarded by default


def test_printing_and_html_show_the_table(comparison):
    text = str(comparison)
    assert "RNSHMC" in text and "bulk ESS/s (call)" in text
    assert "<table" in comparison._repr_html_()


def test_the_figures_render(comparison):
    bars = comparison.plot_ess()
    assert len(bars.patches) == 4 * len(comparison.table)
    lines = comparison.plot_error_vs_time()
    assert len(lines.get_lines()) == 2
    for line in lines.get_lines():
        times, errors = line.get_data()
        assert np.all(np.diff(times) >= 0) and np.all(np.isfinite(errors))
        assert times[-1] <= max(run.whole_call_seconds for run in comparison.runs.values())


def test_named_samplers_and_step_instances_are_accepted():
    with correlated_normal() as model:
        comparison = compare_samplers(
            model,
            samplers={"RNSHMC nuts": lambda: RNSHMC(dynamics="nuts"), "RNSHMC": RNSHMC()},
            tune=200,
            draws=100,
            chains=1,
            nuts=False,
            nutpie=False,
            progressbar=False,
        )
    assert list(comparison.table.index) == ["RNSHMC nuts", "RNSHMC"]
    assert comparison.reference == "RNSHMC nuts"


def test_a_model_without_gradients_skips_nuts_and_says_why():
    with independent_normal(gradient=False):
        comparison = compare_samplers(
            samplers=[RNSHMC], tune=200, draws=100, chains=1, nutpie=True, progressbar=False
        )
    assert list(comparison.table.index) == ["RNSHMC"]
    assert comparison.skipped == {
        NUTS_NAME: "the model's logp has no gradient",
        "nutpie": "the model's logp has no gradient",
    }
    assert "PyMC NUTS: not run (the model's logp has no gradient)" in str(comparison)


@pytest.mark.filterwarnings("ignore:QuadPotentialFullAdapt is an experimental feature")
def test_nuts_variants_take_their_own_options_and_keep_their_tuning_draws(monkeypatch):
    monkeypatch.setattr(compare_module, "nutpie_installed", lambda: False)
    dense = {"init": "jitter+adapt_full", "tune": 60}
    with correlated_normal():
        comparison = compare_samplers(
            samplers={"NUTS dense": "pymc", "nutpie low-rank": "nutpie"},
            tune=100,
            draws=50,
            chains=1,
            random_seed=5,
            nutpie=True,
            progressbar=False,
            discard_tuned_samples=False,
            sample_kwargs={"NUTS dense": dense},
        )
        direct = pm.sample(
            **dense,
            nuts_sampler="pymc",
            draws=50,
            chains=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert list(comparison.table.index) == [NUTS_NAME, "NUTS dense"]
    assert comparison.reference == NUTS_NAME
    assert comparison.skipped == {
        "nutpie": "not installed (pip install nutpie)",
        "nutpie low-rank": "not installed (pip install nutpie)",
    }
    trace = comparison.runs["NUTS dense"].trace
    np.testing.assert_array_equal(posterior_draws(trace, "x"), posterior_draws(direct, "x"))
    for name, tune in ((NUTS_NAME, 100), ("NUTS dense", 60)):
        warmup = comparison.runs[name].trace.warmup_posterior["x"].values
        assert np.asarray(warmup).shape[:2] == (1, tune)
        steps = np.asarray(comparison.runs[name].trace.warmup_sample_stats["n_steps"].values)
        assert comparison.runs[name].tuning_evaluations == (steps.sum() + tune,) * 2


class FakeNutpie:
    """Stands in for nutpie: a clock that compiling moves by 2 s and sampling by 8 s."""

    def __init__(self, trace) -> None:
        self.trace, self.now, self.calls = trace, 100.0, []

    def perf_counter(self) -> float:
        return self.now

    def compile_pymc_model(self, model):
        self.now += 2.0
        return model

    def sample(self, compiled, **options):
        self.calls.append(options)
        self.now += 8.0
        return copy.deepcopy(self.trace)


@pytest.fixture(scope="module")
def trace_with_tuning():
    with correlated_normal():
        return pm.sample(
            tune=40,
            draws=30,
            chains=1,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=False,
        )


def test_nutpie_runs_with_its_options_and_its_draws_get_their_share_of_the_time(
    monkeypatch, trace_with_tuning
):
    fake = FakeNutpie(trace_with_tuning)
    monkeypatch.setitem(sys.modules, "nutpie", fake)
    monkeypatch.setattr(runs_module, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    with correlated_normal():
        comparison = compare_samplers(
            samplers={"nutpie low-rank": "nutpie"},
            tune=40,
            draws=30,
            chains=1,
            random_seed=7,
            nuts=False,
            nutpie=True,
            progressbar=False,
            sample_kwargs={"nutpie low-rank": {"adaptation": "low_rank", "draws": 20}},
        )
    shared = {"tune": 40, "chains": 1, "cores": 1, "seed": 7, "progress_bar": False}
    assert fake.calls == [
        {"save_warmup": True, "draws": 30, **shared},
        {"save_warmup": True, "draws": 20, **shared, "adaptation": "low_rank"},
    ]
    steps = sample_stat(trace_with_tuning, "n_steps").sum()
    tuning_steps = np.asarray(trace_with_tuning.warmup_sample_stats["n_steps"].values).sum()
    assert comparison.reference == "nutpie"
    for run in comparison.runs.values():
        assert run.backend == "nutpie" and run.step is None and run.finish_seconds is None
        assert run.compile_seconds == 2.0 and run.whole_call_seconds == 10.0
        assert run.draw_seconds == pytest.approx(8.0 * steps / (steps + tuning_steps))
        assert "warmup_posterior" not in run.trace and "posterior" in run.trace
    # nutpie reuses the start of each trajectory: one evaluation per leapfrog step
    assert comparison.table.loc["nutpie", "grad evals/draw"] == pytest.approx(
        sample_stat(trace_with_tuning, "n_steps").mean()
    )


def test_the_table_compares_the_variables_both_runs_report():
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0, shape=2)
        pm.HalfNormal("s", 1.0)
        pm.Deterministic("double", 2.0 * x)
    options = {"tune": 100, "draws": 100, "chains": 1, "progressbar": False}
    every = run_sampler(
        "pymc", model, random_seed=1, idata_kwargs={"include_transformed": True}, **options
    )
    fewer = run_sampler(
        "pymc", model, name="x and s", random_seed=2, var_names=["x", "s"], **options
    )
    assert "s_log__" in every.trace.posterior  # PyMC's transformed copy: not measured
    draws = posterior_coordinates(every.trace.posterior)
    assert draws.shape == (1, 100, 5)  # double (2), s, x (2), in name order
    np.testing.assert_array_equal(draws[0, :, 3:], posterior_draws(every.trace, "x")[0])

    runs = {"every": every, "x and s": fewer}
    assert comparison_table(runs)["max |dmean| (MCSE)"].isna().all()
    table = comparison_table(runs, reference="every")
    assert table.loc["every", "min bulk ESS"] == coordinate_ess(draws, "bulk").min()

    def mean_and_mcse(run):
        shared = posterior_coordinates(run.trace.posterior)[:, :, -3:]  # s, x
        sd = shared.std(axis=(0, 1), ddof=1)
        return shared.mean(axis=(0, 1)), sd / np.sqrt(coordinate_ess(shared, "bulk"))

    (mean_a, mcse_a), (mean_b, mcse_b) = mean_and_mcse(every), mean_and_mcse(fewer)
    expected = np.max(np.abs(mean_a - mean_b) / np.hypot(mcse_a, mcse_b))
    assert table.loc["x and s", "max |dmean| (MCSE)"] == pytest.approx(expected)
    assert table.loc["every", "max |dmean| (MCSE)"] == 0.0


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"samplers": "RNSHMC"}, TypeError, "mapping of names"),
        ({"samplers": [3]}, TypeError, "step class"),
        ({"samplers": ["stan"]}, TypeError, "one of"),
        ({"samplers": [RNSHMC], "sample_kwargs": {"NUTS": {}}}, ValueError, "sample_kwargs"),
        ({"samplers": [], "nuts": False, "nutpie": False}, ValueError, "nothing to run"),
        (
            {"samplers": [RNSHMC], "nuts": False, "nutpie": False, "reference": "NUTS"},
            ValueError,
            "reference",
        ),
    ],
)
def test_bad_settings_get_clear_errors(options, error, message):
    with independent_normal():
        with pytest.raises(error, match=message):
            compare_samplers(tune=50, draws=20, chains=1, progressbar=False, **options)


def test_a_run_that_never_moved_has_no_effective_draws():
    rng = np.random.default_rng(3)
    stuck = np.broadcast_to(rng.normal(size=3), (2, 200, 3))
    moving = rng.normal(size=(2, 200, 3))
    moving[:, :, 1] = 1.0  # a constant coordinate beside moving ones: a unit diagonal, say
    for method in ("bulk", "tail"):
        assert np.all(coordinate_ess(stuck, method) == 0.0)
        ess = coordinate_ess(moving, method)
        assert ess[0] > 100 and ess[2] > 100 and ess[1] == 400  # ArviZ: the number of draws
