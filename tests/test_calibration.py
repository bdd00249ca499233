"""Simulation-based calibration: the harness's parts, and every sampler's calibration (slow)."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from tests.calibration import (
    RANKED_DRAWS,
    CalibrationResult,
    ShiftedRNSHMC,
    choose_bins,
    hierarchical,
    hierarchical_model,
    parameter_labels,
    rank_uniformity,
    ranks,
    regression_model,
    replication_seeds,
    run_calibration,
    run_replication,
    simulate_hierarchical,
    simulate_regression,
    thinned,
)
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import NORMAL_MEAN, NORMAL_SD, independent_normal
from tests.step_methods.helpers import sample_with

N_RANKS = RANKED_DRAWS + 1


def wrong_posterior_ranks(scale: float = 1.0, shift: float = 0.0, n: int = 100) -> np.ndarray:
    """Ranks, without sampling noise, from a sampler of ``N(shift, scale^2)`` for ``N(0, 1)``.

    The prior draws of ``n`` replications at evenly spaced quantiles of the right posterior,
    each ranked among ``L`` draws from the sampler's: ``L Phi((z - shift) / scale)``, rounded down.
    """
    z = stats.norm.ppf((np.arange(n) + 0.5) / n)
    fraction = stats.norm.cdf((z - shift) / scale)
    return np.minimum((fraction * N_RANKS).astype(int), RANKED_DRAWS)


# ----------------------------------------------------------------------------- the test itself
def test_chi_square_accepts_uniform_ranks():
    exact = np.tile(np.arange(N_RANKS), 2)[:, None]  # every rank twice: p = 1
    assert rank_uniformity(exact).p_values[0] == pytest.approx(1.0)
    seeded = np.random.default_rng(7).integers(0, N_RANKS, size=(100, 7))
    test = rank_uniformity(seeded)
    assert test.passed and test.bins == 10 and test.counts.sum() == 700
    assert rank_uniformity(wrong_posterior_ranks()).passed


@pytest.mark.parametrize(
    "scale, shift, shape",
    [
        (2.0, 0.0, "hump: the sampler's posterior is twice as wide"),
        (0.5, 0.0, "U: half as wide (or autocorrelated draws)"),
        (1.0, 0.75, "skewed: shifted by 0.75 sd"),
    ],
)
def test_chi_square_rejects_clearly_skewed_ranks(scale, shift, shape):
    test = rank_uniformity(wrong_posterior_ranks(scale, shift))
    assert not test.passed and test.p_values[0] < 1e-6, shape


def test_one_skewed_parameter_fails_the_family_and_bonferroni_divides_alpha():
    uniform = np.random.default_rng(7).integers(0, N_RANKS, size=(100, 6))
    family = np.column_stack([uniform, wrong_posterior_ranks(scale=2.0)])
    test = rank_uniformity(family)
    assert not test.passed and np.argmin(test.p_values) == 6
    # a p-value between alpha / P and alpha passes the family
    p = test.p_values[6]
    assert rank_uniformity(family, family_alpha=p * 6.5).passed
    assert not rank_uniformity(family, family_alpha=p * 7.5).passed


def test_bins_keep_five_expected_ranks_and_divide_the_rank_values():
    assert choose_bins(100, N_RANKS) == 10
    assert choose_bins(30, N_RANKS) == 5
    assert choose_bins(10, N_RANKS) == 2
    with pytest.raises(ValueError, match="too few"):
        choose_bins(9, N_RANKS)
    with pytest.raises(ValueError, match="divide"):
        rank_uniformity(np.zeros((100, 1), dtype=int), bins=3)
    with pytest.raises(ValueError, match="lie in"):
        rank_uniformity(np.full((100, 1), N_RANKS))


# ----------------------------------------------------------------------------- ranks and seeds
def test_ranks_of_thinned_draws():
    draws = np.arange(1000.0)[:, None] * np.ones(2)
    kept = thinned(draws, RANKED_DRAWS)
    assert kept.shape == (RANKED_DRAWS, 2) and kept[0, 0] == 0 and kept[-1, 0] == 999
    assert np.all(np.diff(kept[:, 0]) >= 10)
    np.testing.assert_array_equal(ranks(np.array([-1.0, 1e4]), kept), [0, RANKED_DRAWS])
    with pytest.raises(ValueError):
        thinned(draws[:50], RANKED_DRAWS)


def test_labels_name_every_coordinate():
    labels = parameter_labels(hierarchical(0).truth)
    assert labels == ["mu", "tau", "z[0]", "z[1]", "z[2]", "z[3]", "z[4]"]


def test_seeds_share_the_data_across_samplers_but_not_the_sampling():
    data, sampling = replication_seeds("hierarchical", "RNSHMC", 3)
    assert replication_seeds("hierarchical", "RNSHMC", 3) == (data, sampling)
    nuts_data, nuts_sampling = replication_seeds("hierarchical", "NUTS", 3)
    assert nuts_data == data and nuts_sampling != sampling
    assert replication_seeds("hierarchical", "RNSHMC", 4)[0] != data
    assert replication_seeds("nonlinear_regression", "RNSHMC", 3)[0] != data


@pytest.mark.parametrize(
    "simulate, build",
    [(simulate_hierarchical, hierarchical_model), (simulate_regression, regression_model)],
    ids=["hierarchical", "nonlinear_regression"],
)
def test_the_simulator_draws_from_the_models_prior(simulate, build):
    # a simulator that disagreed with its model would make every sampler fail the calibration
    rng = np.random.default_rng(11)
    simulated = [simulate(rng) for _ in range(2000)]
    with build(simulated[0][1]):
        prior = pm.sample_prior_predictive(draws=2000, random_seed=12)
    for name in simulated[0][0]:
        ours = np.array([truth[name] for truth, _ in simulated]).reshape(2000, -1)[:, 0]
        pymcs = np.asarray(prior.prior[name].values).reshape(2000, -1)[:, 0]
        assert stats.ks_2samp(ours, pymcs).pvalue > 1e-3, name
    ours = np.array([y for _, y in simulated])[:, 0]
    pymcs = np.asarray(prior.prior_predictive["y"].values).reshape(2000, -1)[:, 0]
    assert stats.ks_2samp(ours, pymcs).pvalue > 1e-3, "y[0]"


# ----------------------------------------------------------------------------- the samplers
def test_the_shifted_sampler_is_wrong_as_documented():
    # every coordinate 0.75 exploration sds too high, the sds right; one exact logp per draw
    idata, step = sample_with(
        ShiftedRNSHMC, independent_normal(), tune=500, draws=1000, seed=3, chains=1
    )
    offset = step.offset
    assert np.all((offset > 0.4 * NORMAL_SD) & (offset < 1.2 * NORMAL_SD))
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i] + offset[i], NORMAL_SD[i], f"x[{i}]")
    assert sample_stat(idata, "used_surrogate").all()
    assert (sample_stat(idata, "n_gradient_evals") == 0).all()


def test_a_two_replication_smoke_run_is_reproducible_replication_by_replication():
    result = run_calibration("nonlinear_regression", "RNSHMC", replications=2)
    assert isinstance(result, CalibrationResult)
    assert result.labels == ["a", "b", "sigma"] and result.ranks.shape == (2, 3)
    assert np.all((result.ranks >= 0) & (result.ranks <= RANKED_DRAWS))
    assert result.passed is None and np.isnan(result.p_values).all()
    # a tenth of the draws are the safety net's exact ones
    assert all(r.surrogate_share > 0.8 and r.min_ess > 0 for r in result.replications)
    assert "not tested" in result.summary()
    again = run_replication("nonlinear_regression", "RNSHMC", 1)
    np.testing.assert_array_equal(again.ranks, result.replications[1].ranks)
    assert again.min_ess == result.replications[1].min_ess


# ----------------------------------------------------------------------------- slow: SBC proper
PROCESSES = 2
CALIBRATED = ["NUTS", "RNSHMC", "ARNSHMC", "SparseGridHMC", "RNSRMHMC"]
MODEL_NAMES = ["hierarchical", "nonlinear_regression"]
EXPENSIVE = {("hierarchical", "RNSRMHMC"), ("nonlinear_regression", "RNSRMHMC")}
"""Cases of 10-55 s per replication: 40 replications (5 bins of 8), the others 100."""
SUITE_ALPHA = 0.01
PAIR_ALPHA = SUITE_ALPHA / (len(CALIBRATED) * len(MODEL_NAMES))
"""Family-wise false-alarm rate per model and sampler: the whole slow test's is at most 1 %."""
REFUSED = {("hierarchical", "SparseGridHMC")}
"""Cases whose surrogate must be refused in every replication: the hierarchy's grids estimate
their largest error at 122 to 3e5 nats, above ``max_error`` (they mixed too slowly to calibrate
when accepted: ranks U-shaped, p = 5e-5 on tau, 2026-11-24), so exact NUTS samples."""


SURROGATE_SHARE = 0.8
"""The median replication of a surrogate sampler must have drawn this share of its kept draws
with the surrogate: the safety net makes a tenth of them exact NUTS draws at random, so a
median of 0.9, the check before, failed or passed by chance (0.886-0.899 on 2026-11-29). On the
hierarchy the replications with a small ``tau`` are a funnel whose walls hand the chain to
exact NUTS: 56 of RNSHMC's 100 and about 23 of RNSRMHMC's 40 drew with their surrogate (2 of
RNSHMC's 20 went exact when the check was written), a majority still."""


def replications(model: str, sampler: str) -> int:
    return 40 if (model, sampler) in EXPENSIVE else 100


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "sampler"),
    [(model, sampler) for sampler in CALIBRATED for model in MODEL_NAMES],
    ids=lambda value: value,
)
def test_sampler_is_calibrated(model, sampler):
    """SBC of each sampler with PyMC's defaults: one chain of 1000 + 1000 draws, L = 99.

    Chi-square per parameter (10 bins of 10 expected at 100 replications, 5 of 8 at 40),
    Bonferroni over the parameters, family-wise alpha 0.1 % per case, so 1 % over the ten
    cases. NUTS is the harness's own control. The surrogate samplers must also have drawn
    with their surrogate in most replications (median share ``SURROGATE_SHARE``, the net's
    tenth aside; a replication whose surrogate collapsed or met a wall samples with exact
    NUTS, which is calibrated but not the sampler's own kernel), except where the surrogate
    must be refused (``REFUSED``).

    Seconds per replication, measured with 3 replications each in one process on 2 cores that
    two other test suites kept busy (load 2-4); at load 2 they took about 0.6 times as long
    (RNSRMHMC on the hierarchical model: 30 s against 50-57 s):

    ============== ============ ====================
    sampler        hierarchical nonlinear_regression
    ============== ============ ====================
    NUTS           0.5-0.8      1.0-1.4
    RNSHMC         4-7.5        1.2-2.2
    ARNSHMC        5-12         1.6-2.4
    SparseGridHMC  0.7-1.1      1.5-2.2
    RNSRMHMC       30-57        13-31
    ============== ============ ====================

    SparseGridHMC's grid is refused on the hierarchical model and exact NUTS samples (22-43 s
    per replication when the grid was accepted).

    With the biased samplers' test below, about 6000 core-seconds at those rates: 50 minutes
    on the busy machine with two processes, roughly 30 minutes on a quiet one. With 100
    replications for every case it would be about 1.5 times that.
    """
    result = run_calibration(
        model,
        sampler,
        replications(model, sampler),
        processes=PROCESSES,
        family_alpha=PAIR_ALPHA,
    )
    print(result.summary())
    assert result.passed, result.summary()
    shares = [r.surrogate_share for r in result.replications]
    if (model, sampler) in REFUSED:
        assert max(shares) == 0.0, result.summary()
    elif sampler != "NUTS":
        assert np.median(shares) >= SURROGATE_SHARE, result.summary()


@pytest.mark.slow
@pytest.mark.parametrize(
    "sampler, models",
    [("ShiftedRNSHMC", MODEL_NAMES), ("SurrogateAcceptanceRNSHMC", ["nonlinear_regression"])],
    ids=["ShiftedRNSHMC", "SurrogateAcceptanceRNSHMC"],
)
def test_a_biased_sampler_fails_the_calibration(sampler, models):
    """As above, 100 replications, for the deliberately wrong samplers: each fails somewhere.

    ShiftedRNSHMC samples the posterior moved by 0.75 sd in every coordinate (1.5-10 s per
    replication): a chi-square test of 100 such ranks fails with probability near 1 (0.93 at
    40). SurrogateAcceptanceRNSHMC accepts on the surrogate alone (0.7-2 s), fitted once on a
    40-draw exploration: on the nonlinear regression its ranks fail (``sigma``: p = 1e-12,
    2026-11-29).
    """
    results = [
        run_calibration(m, sampler, 100, processes=PROCESSES, family_alpha=PAIR_ALPHA)
        for m in models
    ]
    for result in results:
        print(result.summary())
    assert not all(result.passed for result in results)
