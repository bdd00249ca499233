"""RNSRMHMC: Riemannian surrogate dynamics, exact draws, clear errors.

The correctness checks are the shared harness's (MCSE-scaled moments against analytic
posteriors); the wrong-surrogate test moves the surrogate's mode and sharpens its curvature,
so its metric and forces are both wrong, and the exact test must still give the posterior.
"""

import numpy as np
import pytest
from scipy import stats

from pymc_rnshmc import RNSRMHMC, RandomNetworkSurrogate, SurrogateWarning
from pymc_rnshmc.surrogates.network.curvature import RidgeForm
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import beta_binomial, correlated_normal
from tests.step_methods.helpers import assert_correlated_normal, sample_with, surrogate_draws

METRICS = pytest.mark.parametrize("metric", ["softabs", "diagonal"])


class ShiftedCurvatureSurrogate(RandomNetworkSurrogate):
    """A fitted network whose dynamics see a potential shifted by ``shift``, 1.5 times as sharp."""

    def __init__(self, shift: float) -> None:
        super().__init__()
        self.shift = shift

    def ridge_form(self) -> RidgeForm:
        form = super().ridge_form()
        return form._replace(
            base_hessian=1.5 * form.base_hessian,
            coefficients=1.5 * form.coefficients,
            weights=form.weights,
            biases=form.biases - form.weights @ np.full(form.centre.shape, self.shift),
            centre=form.centre + self.shift,
        )


@METRICS
def test_correlated_normal_including_the_correlation(metric):
    # the diagonal metric cannot follow the 0.9 correlation: more draws for the same ESS
    draws = 2000 if metric == "diagonal" else 1000
    idata, step = sample_with(
        RNSRMHMC, correlated_normal(), tune=600, draws=draws, seed=41, metric=metric
    )
    assert step.trajectory_choice.best.metric.kind == metric
    used = surrogate_draws(idata)
    assert (sample_stat(idata, "n_gradient_evals")[used] == 0).all()
    assert (sample_stat(idata, "n_logp_evals")[used] == 1).all()
    iterations = sample_stat(idata, "fixed_point_iterations")[used]
    assert np.isfinite(iterations).all() and (iterations >= 2).all()
    assert_correlated_normal(idata, metric)


def test_beta_binomial_through_the_logit_transform():
    idata, _ = sample_with(RNSRMHMC, beta_binomial(), tune=600, draws=1000, seed=42)
    assert sample_stat(idata, "used_surrogate").mean() > 0.9
    posterior = stats.beta(9, 16)
    assert_moments(posterior_draws(idata, "p"), posterior.mean(), posterior.std(), "p")


def test_a_deliberately_wrong_surrogate_still_gives_the_right_answer():
    idata, _ = sample_with(
        RNSRMHMC,
        correlated_normal(),
        tune=600,
        draws=1500,
        seed=43,
        surrogate=ShiftedCurvatureSurrogate(shift=0.2),
        refit_during_tuning=False,
    )
    used = surrogate_draws(idata)
    assert sample_stat(idata, "accept")[used].mean() < 0.9  # the exact test does see the error
    assert_correlated_normal(idata, "wrong surrogate", min_ess=100)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"metric": "hessian"}, "metric must be one of"),
        ({"surrogate": RandomNetworkSurrogate(hidden_units="radial")}, "additive units"),
    ],
)
def test_unusable_settings_get_a_clear_error(options, message):
    with correlated_normal():
        with pytest.raises(ValueError, match=message):
            RNSRMHMC(**options)


def test_turning_the_reversibility_check_off_warns_that_the_draws_are_not_exact():
    with correlated_normal():
        with pytest.warns(SurrogateWarning, match="no longer exact"):
            RNSRMHMC(check_reversibility=False)
