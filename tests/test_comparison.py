"""compare_samplers: one call that runs NUTS and surrogate samplers and tabulates them."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from pymc_rnshmc import RNSHMC, compare_samplers
from pymc_rnshmc.comparison import NUTS_NAME
from tests.checks import effective_sample_size, posterior_draws, sample_stat
from tests.models import correlated_normal, independent_normal


@pytest.fixture(scope="module")
def comparison():
    with independent_normal():
        return compare_samplers(
            samplers=[RNSHMC], tune=300, draws=300, random_seed=3, nutpie=False, progressbar=False
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
    assert table.loc["RNSHMC", "logp evals/draw"] == 1.0
    assert table.loc["RNSHMC", "grad evals/draw"] == 0.0
    assert table.loc["RNSHMC", "accept"] == pytest.approx(sample_stat(rnshmc, "accept").mean())
    nuts = comparison.runs[NUTS_NAME].trace
    assert table.loc[NUTS_NAME, "grad evals/draw"] == pytest.approx(
        sample_stat(nuts, "n_steps").mean()
    )
    assert table.loc[NUTS_NAME, "divergences"] == sample_stat(nuts, "diverging").sum()


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


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"samplers": "RNSHMC"}, TypeError, "mapping of names"),
        ({"samplers": [3]}, TypeError, "step class"),
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
