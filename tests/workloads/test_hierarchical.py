"""The funnel workloads: their log densities are the textbook ones."""

import numpy as np
import pytest
from scipy import stats

from pymc_rnshmc.workloads import EIGHT_SCHOOLS, eight_schools_centered, neals_funnel


@pytest.mark.parametrize("scale_sd", [3.0, 1.0])
def test_neals_funnel_density(scale_sd):
    model = neals_funnel(dim=4, scale_sd=scale_sd)
    point = {"v": np.array(0.7), "x": np.array([0.3, -1.2, 2.0])}
    expected = (
        stats.norm(0, scale_sd).logpdf(0.7) + stats.norm(0, np.exp(0.35)).logpdf(point["x"]).sum()
    )
    assert model.compile_logp()(point) == pytest.approx(expected, rel=1e-6)


def test_eight_schools_centered_density():
    model = eight_schools_centered()
    theta = np.linspace(-2.0, 12.0, 8)
    point = {"mu": np.array(3.0), "tau_log__": np.log(2.5), "theta": theta}
    expected = (
        stats.norm(0, 5).logpdf(3.0)
        + stats.halfcauchy(scale=5).logpdf(2.5)
        + np.log(2.5)  # the log transform's Jacobian
        + stats.norm(3.0, 2.5).logpdf(theta).sum()
        + stats.norm(theta, EIGHT_SCHOOLS["sigma"]).logpdf(EIGHT_SCHOOLS["y"]).sum()
    )
    assert model.compile_logp()(point) == pytest.approx(expected, rel=1e-6)
