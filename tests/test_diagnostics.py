"""plot_surrogate: the figure a user looks at when acceptance is poor, for every sampler."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pymc as pm
import pytest

from pymc_rnshmc import plot_surrogate
from tests.checks import sample_stat
from tests.models import independent_normal
from tests.step_methods.conftest import SAMPLERS


def sample(case, discard_tuned_samples=False):
    with independent_normal(gradient=not case.black_box) as model:
        step = case.make()
        trace = pm.sample(
            step=step,
            tune=300,
            draws=200,
            chains=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
            discard_tuned_samples=discard_tuned_samples,
        )
    return model, step, trace


@pytest.mark.parametrize("case", SAMPLERS, ids=[case.id for case in SAMPLERS])
def test_every_sampler_gets_its_panels(case):
    _, step, trace = sample(case)
    figure = plot_surrogate(step, trace)
    titles = [ax.get_title() for ax in figure.axes if ax.get_visible()]
    expected = ["surrogate vs exact", "acceptance", "surrogate error", "exact evaluations per draw"]
    if "steps_outside_domain" in case.stats:
        expected.append("steps outside the box")
    assert titles == expected
    positions, exact = step.held_out_points()
    assert len(positions) == len(exact) > 0
    scatter = figure.axes[0].collections[0]
    assert len(scatter.get_offsets()) == np.isfinite(exact).sum()
    accept = figure.axes[1].get_lines()[0].get_ydata()
    assert len(accept) == 300 + 200 - 50 + 1  # tuning and kept draws, moving mean of 50
    matplotlib.pyplot.close(figure)


def test_the_held_out_points_were_not_trained_on_and_have_their_exact_potential():
    case = SAMPLERS[0]
    model, step, _ = sample(case)
    positions, exact = step.held_out_points()
    logp = model.compile_logp()
    for position, potential in zip(positions[:5], exact[:5], strict=True):
        point = {"x": position}
        assert potential == pytest.approx(-logp(point), rel=1e-10)


def test_the_trace_alone_and_the_step_alone():
    _, step, trace = sample(SAMPLERS[0], discard_tuned_samples=True)
    only_trace = plot_surrogate(trace=trace)
    assert next(ax.get_title() for ax in only_trace.axes if ax.get_visible()) == "acceptance"
    assert len(only_trace.axes[0].get_lines()[0].get_ydata()) == 200 - 50 + 1
    only_step = plot_surrogate(step)
    assert [ax.get_title() for ax in only_step.axes] == ["surrogate vs exact"]
    errors = sample_stat(trace, "surrogate_error")
    assert np.isfinite(errors).any()


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="needs the fitted step, the trace, or both"):
        plot_surrogate()
    with independent_normal():
        nuts = pm.sample(tune=50, draws=20, chains=1, progressbar=False, random_seed=1)
    with pytest.raises(ValueError, match="no surrogate sampler's statistics"):
        plot_surrogate(trace=nuts)
    with independent_normal():
        unfitted = SAMPLERS[0].make()
    with pytest.raises(ValueError, match="never fitted one"):
        plot_surrogate(unfitted)
