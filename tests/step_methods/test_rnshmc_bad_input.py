"""RNSHMC on bad input: a clear error, a recorded divergence or an exact fallback, never a crash
or a wrong answer.

Covered here: discrete variables and models without continuous ones, invalid settings, tuning
too short to train a surrogate, proposals where the exact ``logp`` is ``-inf`` or NaN,
surrogates that return NaN or overflow (everywhere: exact NUTS; in places: exact gradients
there), an ill-conditioned posterior and training set, and a
starting point outside the support. Every sampling run checks the posterior moments within
4.5 Monte Carlo standard errors (``tests.checks.assert_moments``): a bad input may cost speed,
never correctness.
"""

from __future__ import annotations

import contextlib
import re
import signal
import warnings

import numpy as np
import pymc as pm
import pytest
from pymc.exceptions import SamplingError
from scipy import stats

from pymc_rnshmc import RNSHMC, RandomNetworkSurrogate, SurrogateWarning
from pymc_rnshmc.step_methods.chain import _Host
from tests.checks import assert_moments, posterior_draws, sample_stat
from tests.models import (
    CORRELATED_COVARIANCE,
    CORRELATED_MEAN,
    NORMAL_MEAN,
    NORMAL_SD,
    TRUNCATION,
    correlated_normal,
    independent_normal,
    truncated_normal,
)
from tests.step_methods.helpers import DistortedSurrogate, start_chain, surrogate_draws

TUNE, DRAWS, EXPLORATION = 400, 1000, 300


def run(model, *, tune=TUNE, draws=DRAWS, seed=31, sample_options=None, **step_options):
    """Sample two chains of ``model`` with ``RNSHMC(**step_options)`` in one process.

    Costs are not weighed (cheap models: see ``helpers.sample_with``).
    """
    step_options.setdefault("exploration_steps", EXPLORATION)
    step_options.setdefault("weigh_costs", False)
    with model:
        step = RNSHMC(**step_options)
        return pm.sample(
            step=step,
            tune=tune,
            draws=draws,
            chains=2,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            **(sample_options or {}),
        )


def surrogate_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, SurrogateWarning)]


def assert_normal_moments(idata, label: str = "", min_ess: int = 200) -> None:
    """Moments of ``tests.models.independent_normal``, coordinate by coordinate."""
    x = posterior_draws(idata, "x")
    for i in range(3):
        assert_moments(x[..., i], NORMAL_MEAN[i], NORMAL_SD[i], f"{label} x[{i}]", min_ess)


def assert_divergent_surrogate_draws_were_rejected(idata) -> np.ndarray:
    """Posterior surrogate draws flagged ``diverging`` stayed where they were.

    Returns the ``(chain, draw)`` mask of those draws.
    """
    diverging = sample_stat(idata, "diverging") & sample_stat(idata, "used_surrogate")
    assert not sample_stat(idata, "accepted")[diverging].any(), "a divergent proposal was accepted"
    x = posterior_draws(idata, "x")
    x = x.reshape(*x.shape[:2], -1)
    stayed = np.all(x[:, 1:] == x[:, :-1], axis=-1)
    assert stayed[diverging[:, 1:]].all(), "the chain moved on a divergent draw"
    return diverging


# --------------------------------------------------------------------------- discrete variables


@pytest.mark.parametrize(
    ("distribution", "name"),
    [(lambda: pm.Bernoulli("coin", 0.3), "coin"), (lambda: pm.Poisson("count", 4.0), "count")],
    ids=["bernoulli", "poisson"],
)
def test_discrete_variables_are_refused_with_their_name(distribution, name):
    with pm.Model():
        continuous = pm.Normal("x", 0.0, 1.0)
        discrete = distribution()
        with pytest.raises(ValueError, match=f"'{name}'"):
            RNSHMC(vars=[discrete], exploration_steps=EXPLORATION)
        with pytest.raises(ValueError, match=f"'{name}'"):
            RNSHMC(vars=[continuous, discrete], exploration_steps=EXPLORATION)


@pytest.mark.parametrize(
    "switch",
    [lambda: pm.Bernoulli("z", 0.5), lambda: pm.DiscreteUniform("z", 0, 1)],
    ids=["binary-gibbs", "metropolis"],
)
def test_mixed_model_leaves_the_discrete_variable_to_pymc_and_gets_the_mixture_right(switch):
    # z ~ Bernoulli(1/2), x | z ~ N(z, 1): x is the mixture 0.5 N(0, 1) + 0.5 N(1, 1), with
    # mean 0.5 and variance 1 + 0.25. The surrogate is fitted while z changes under it. PyMC
    # samples z with BinaryGibbsMetropolis (no stats) or, as an integer, with Metropolis, whose
    # stats share names with this step's (a type clash there made PyMC refuse the trace).
    with pm.Model():
        z = switch()
        x = pm.Normal("x", 1.0 * z, 1.0)
        step = RNSHMC(vars=[x], exploration_steps=EXPLORATION, weigh_costs=False)
        idata = pm.sample(
            step=[step],
            tune=TUNE,
            draws=DRAWS,
            chains=2,
            cores=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert [v.name for v in step.vars] == ["x"]
    surrogate_draws(idata)
    assert_moments(posterior_draws(idata, "x"), 0.5, np.sqrt(1.25), "x")
    assert_moments(posterior_draws(idata, "z").astype(float), 0.5, 0.5, "z")


def test_a_model_without_continuous_variables_is_refused():
    with pm.Model():
        pm.Bernoulli("coin", 0.5)
        pm.Poisson("count", 3.0)
        with pytest.raises(ValueError, match="continuous"):
            RNSHMC(exploration_steps=EXPLORATION)


# --------------------------------------------------------------------------- invalid settings

INVALID_SETTINGS = [
    ("n_hidden", 0),
    ("n_hidden", -5),
    ("n_hidden", 2.5),
    ("n_hidden", float("nan")),
    ("n_hidden", float("inf")),
    ("hidden_units", "gaussian"),
    ("activation", "relu"),
    ("penalty", -1.0),
    ("target_accept", 0.0),
    ("target_accept", 1.0),
    ("target_accept", 1.5),
    ("target_accept", float("nan")),
    ("surrogate_target_accept", 0.0),
    ("surrogate_target_accept", 1.0),
    ("surrogate_target_accept", -0.1),
    ("surrogate_target_accept", float("nan")),
    ("exploration_steps", 0),
    ("exploration_steps", -10),
    ("exploration_steps", 2.5),
    ("exploration_steps", float("nan")),
    ("training_window", 0),
    ("training_window", -1),
    ("training_window", 2.5),
    ("training_window", float("inf")),
    ("path_length", 0.0),
    ("path_length", -1.0),
    ("path_length", float("nan")),
    ("path_length", float("inf")),
    ("max_steps", 0),
    ("max_steps", -3),
    ("max_steps", 2.5),
    ("max_steps", float("nan")),
    ("max_steps", float("inf")),
    ("time_limit", 0.0),
    ("time_limit", -2.0),
    ("time_limit", float("nan")),
    ("time_limit", float("inf")),
    ("time_limit", "60"),
    ("time_limit", True),
    ("weigh_costs", "yes"),
    ("weigh_costs", 1),
    ("tune_on_surrogate", "no"),
    ("explore_from_mode", "yes"),
    ("explore_from_mode", None),
    ("refit_during_tuning", "no"),
    ("refit_during_tuning", 0),
]


@pytest.mark.parametrize(
    ("option", "value"), INVALID_SETTINGS, ids=[f"{o}={v!r}" for o, v in INVALID_SETTINGS]
)
def test_invalid_setting_raises_value_error_naming_the_parameter(option, value):
    with independent_normal():
        with pytest.raises(ValueError, match=re.escape(option)):
            RNSHMC(**{"exploration_steps": EXPLORATION, option: value})


class WithoutPotential:
    """Has ``fit`` and ``gradient`` but no ``potential``."""

    def fit(self, positions, potentials, gradients=None, rng=None):
        return self

    def gradient(self, position):
        return np.zeros_like(position)


@pytest.mark.parametrize(
    "surrogate",
    [object(), WithoutPotential(), RandomNetworkSurrogate],
    ids=["plain-object", "missing-potential", "class-instead-of-instance"],
)
def test_a_surrogate_without_the_protocol_is_a_type_error(surrogate):
    with independent_normal():
        with pytest.raises(TypeError, match="surrogate"):
            RNSHMC(surrogate=surrogate, exploration_steps=EXPLORATION)


# --------------------------------------------------------------------------- too little tuning


def test_tuning_too_short_to_train_warns_and_keeps_sampling_exactly():
    with pytest.warns(SurrogateWarning, match="tune"):
        idata = run(independent_normal(), tune=5, seed=2)
    assert not sample_stat(idata, "used_surrogate").any()
    assert (sample_stat(idata, "n_gradient_evals") > 0).all()
    assert_normal_moments(idata, "tune=5")


# --------------------------------------------------------------------------- non-finite logp


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
@pytest.mark.parametrize("bad_value", [-np.inf, np.nan], ids=["minus-inf", "nan"])
def test_proposals_with_non_finite_logp_are_rejected_as_divergences(bad_value, dynamics):
    # x ~ N(0, 1) cut at x < 1 by a potential that is -inf/NaN beyond: the cut is 1 sd from the
    # mode, so surrogate trajectories (which do not see the cut) often end beyond it.
    idata = run(
        truncated_normal(bad_value),
        draws=2000,
        sample_options={"discard_tuned_samples": False},
        dynamics=dynamics,
    )
    x = posterior_draws(idata, "x")
    assert (x < TRUNCATION).all()
    assert np.isfinite(sample_stat(idata, "lp")).all()
    reference = stats.truncnorm(-np.inf, TRUNCATION)
    assert_moments(x, reference.mean(), reference.std(), "truncated x")

    if dynamics == "nuts":  # a tree that diverged can still hand on a state of its valid part
        assert sample_stat(idata, "diverging").any(), "no surrogate proposal crossed the cut"
        return
    diverging = assert_divergent_surrogate_draws_were_rejected(idata)
    warmup = idata.warmup_sample_stats
    warmup_diverging = np.asarray(warmup["diverging"].values) & np.asarray(
        warmup["used_surrogate"].values
    )
    assert not np.asarray(warmup["accepted"].values)[warmup_diverging].any()
    assert diverging.sum() + warmup_diverging.sum() > 0, "no surrogate proposal crossed the cut"


# --------------------------------------------------------------------------- failing surrogates


def test_a_surrogate_that_is_nan_everywhere_warns_at_fit_and_sampling_stays_exact():
    with pytest.warns(SurrogateWarning, match="could not fit"):
        idata = run(independent_normal(), surrogate=DistortedSurrogate("nan"), seed=5)
    assert not sample_stat(idata, "used_surrogate").any()
    assert_normal_moments(idata, "nan surrogate")


@pytest.mark.parametrize("dynamics", ["hmc", "nuts"])
@pytest.mark.parametrize("kind", ["nan_far", "overflow"])
def test_a_surrogate_that_fails_far_out_falls_back_to_exact_gradients_there(kind, dynamics):
    # With NUTS trees the exact potential is used there too: a tree cannot propose a state its
    # own density gives no weight, so a NaN there would cut the region out of the chain.
    amount = 2.5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = run(
            independent_normal(),
            draws=2000,
            surrogate=DistortedSurrogate(kind, amount),
            dynamics=dynamics,
        )
    used = surrogate_draws(idata)
    # Where the surrogate fails the trajectory follows the exact gradient, and says so.
    assert (sample_stat(idata, "n_gradient_evals")[used] > 0).any()
    assert any(issubclass(w.category, SurrogateWarning) for w in caught)
    assert_normal_moments(idata, kind, min_ess=100)
    # The surrogate fails beyond `amount` sds of some coordinate, a region with posterior
    # probability 1 - (1 - P(|N(0,1)| > amount))^3; the chain must still visit it as often.
    z = (posterior_draws(idata, "x") - NORMAL_MEAN) / NORMAL_SD
    far = (np.abs(z).max(axis=-1) > amount).astype(float)
    probability = 1.0 - (1.0 - 2.0 * stats.norm.sf(amount)) ** 3
    assert far.any(), (
        f"{kind}: no draw beyond {amount} sd, where the posterior has {probability:.1%}"
    )
    assert_moments(
        far,
        probability,
        np.sqrt(probability * (1 - probability)),
        f"{kind}: P(beyond {amount} sd)",
        100,
    )
    # numpy's overflow warnings stay inside the step
    leaked = [
        f"{w.filename}:{w.lineno}: {w.message}"
        for w in caught
        if issubclass(w.category, RuntimeWarning) and "pymc_rnshmc" in w.filename
    ]
    assert not leaked, f"RuntimeWarnings escaped the step: {leaked[:3]}"


def test_a_coordinate_with_zero_training_gradients_keeps_the_surrogate_force():
    # Inside Uniform(-1, 1) without a transform the exact gradient of u is exactly zero: a
    # force bound from the training gradients alone collapsed there, and every leapfrog step
    # fell back to the exact gradient (16.6 per draw measured).
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0)
        pm.Uniform("u", -1.0, 1.0, default_transform=None)
    idata = run(model, draws=300, seed=3, exploration_steps=200, tune=300)
    used = surrogate_draws(idata)
    assert (sample_stat(idata, "n_gradient_evals")[used] == 0).all()
    assert (np.abs(posterior_draws(idata, "u")) < 1.0).all()


def test_a_trajectory_deep_in_an_untrained_region_stops_and_is_rejected():
    # The surrogate fails beyond 1.5 sd, and long trajectories go there: they used to take the
    # exact gradient at every step (up to max_steps in one draw). Now each draw pays at most
    # max(16, a quarter of its points) exact gradients, and the rest is a counted rejection.
    idata = run(
        independent_normal(),
        draws=300,
        surrogate=DistortedSurrogate("nan_far", 1.5),
        path_length=12.0,
    )
    exact = sample_stat(idata, "n_gradient_evals")
    allowed = np.maximum(16, (0.25 * (sample_stat(idata, "n_steps") + 1)).astype(int))
    assert (exact <= allowed + 1).all(), "a draw paid for more exact gradients than allowed"
    left = sample_stat(idata, "left_trust_region")
    assert left.any() and not sample_stat(idata, "accepted")[left].any()
    assert not sample_stat(idata, "diverging")[left].any()


# --------------------------------------------------------------------------- ill-conditioning

ILL_SDS = np.array([1e-4, 1e3])
ILL_CORRELATION = 0.99
ILL_MEAN = np.array([1.0, 1e4])


def ill_conditioned_normal() -> pm.Model:
    """Scales 1e-4 and 1e3 (seven orders of magnitude) with correlation 0.99.

    The large coordinate sits ten sds from zero, as an intercept in natural units would.
    """
    covariance = np.outer(ILL_SDS, ILL_SDS) * np.array(
        [[1.0, ILL_CORRELATION], [ILL_CORRELATION, 1.0]]
    )
    with pm.Model() as model:
        pm.MvNormal("x", ILL_MEAN, covariance)
    return model


class DuplicatedTrainingDraws(RandomNetworkSurrogate):
    """Fits on every training draw repeated four times (degenerate least-squares rows)."""

    def fit(self, positions, potentials, gradients=None, rng=None):
        def repeat(values):
            return None if values is None else np.repeat(values, 4, axis=0)

        return super().fit(repeat(positions), repeat(potentials), repeat(gradients), rng=rng)


@pytest.mark.parametrize(
    ("model_factory", "mean", "sds", "correlation", "surrogate"),
    [
        (ill_conditioned_normal, ILL_MEAN, ILL_SDS, ILL_CORRELATION, None),
        (
            correlated_normal,
            CORRELATED_MEAN,
            np.sqrt(np.diag(CORRELATED_COVARIANCE)),
            CORRELATED_COVARIANCE[0, 1] / np.sqrt(np.prod(np.diag(CORRELATED_COVARIANCE))),
            DuplicatedTrainingDraws(),
        ),
    ],
    ids=["scales-1e-4-and-1e3-correlation-0.99", "duplicated-training-draws"],
)
def test_an_ill_conditioned_fit_still_samples_with_the_surrogate(
    model_factory, mean, sds, correlation, surrogate
):
    options = {} if surrogate is None else {"surrogate": surrogate}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = run(model_factory(), seed=5, **options)
    assert not surrogate_warnings(caught)
    surrogate_draws(idata)
    x = posterior_draws(idata, "x")
    for i in range(2):
        assert_moments(x[..., i], mean[i], sds[i], f"x[{i}]")
    standardized_product = np.prod((x - mean) / sds, axis=-1)
    assert_moments(standardized_product, correlation, np.sqrt(1 + correlation**2), "z0 * z1")


# --------------------------------------------------------------------------- bad starting point


@contextlib.contextmanager
def time_limit(seconds: float):
    """Fail with TimeoutError instead of hanging (main thread, POSIX)."""

    def expire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("bad_value", [-np.inf, np.nan], ids=["minus-inf", "nan"])
def test_a_start_outside_the_support_is_a_sampling_error(bad_value):
    with time_limit(60), pytest.raises(SamplingError, match=r"(?i)initial"):
        run(
            truncated_normal(bad_value),
            tune=100,
            draws=100,
            exploration_steps=50,
            sample_options={"initvals": {"x": 2.0 * TRUNCATION}},
        )


def step_in_surrogate_phase(model) -> RNSHMC:
    """An RNSHMC step on ``model`` taken ten draws into its surrogate phase, tuning on."""
    with model:
        step = RNSHMC(exploration_steps=50)
    start_chain(step, seed=8, tune=100, draws=10)
    point = model.initial_point()
    for _ in range(60):
        point, _ = step.step(point)
    assert step.phase == "surrogate"
    return step


def test_a_bad_current_point_in_the_surrogate_phase_is_a_sampling_error():
    step = step_in_surrogate_phase(truncated_normal(-np.inf))
    with time_limit(60), pytest.raises(SamplingError, match="Bad initial energy"):
        step.step({"x": np.array(2.0 * TRUNCATION)})


def test_trajectories_capped_by_max_steps_are_told_at_the_end_of_tuning():
    # SparseGridHMC on a 7-d hierarchy tuned its step size down to its floor, so every
    # trajectory stopped at max_steps, silently: now the end of tuning says so
    step = step_in_surrogate_phase(independent_normal())
    capped = step.path_length / (3 * step.max_steps)
    step._warmup.bounded_step_size = lambda tune: capped
    with pytest.warns(SurrogateWarning, match=f"stop at max_steps={step.max_steps}"):
        step.stop_tuning()


def test_a_refit_searches_step_sizes_from_within_a_decade_of_the_current_choice(monkeypatch):
    # posteriordb's kilpisjarvi: where the exact test kept rejecting, dual averaging's average
    # sank to 1e-42, and a refit that started its step-size search there chose trajectories
    # that did not move
    step = step_in_surrogate_phase(independent_normal())
    monkeypatch.setattr(step._warmup.adaptation, "current", lambda tune: 1e-42)
    seen = []
    choose = step.dynamics.choose
    monkeypatch.setattr(
        step.dynamics, "choose", lambda s, setting: seen.append(setting) or choose(s, setting)
    )
    chosen = step.trajectory_choice.best.step_size
    step._warmup.refit(step._chain.iter_count, step.rng, _Host(step._chain, step))
    assert seen[0].step_size >= 0.1 * chosen
