"""``time_limit``: an evaluation that runs too long is abandoned and counted as a rejection.

``tests.models.slow_normal`` is ``x ~ N(0, I_2)`` through a forward model that sleeps for
``SLEEP`` seconds where ``x`` exceeds ``SLOW_BEYOND``, as a solver can at absurd parameters;
with a time limit the samplers target the normal truncated to ``x < SLOW_BEYOND``. The
mechanism itself (``pymc_rnshmc.step_methods.time_limit``) is tested on plain functions: the
SIGALRM handler and timer it replaces are put back on every exit.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import pickle
import signal
import sys
import threading
import time
import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.gradient
import pytensor.tensor as pt
import pytest
from pymc.blocking import DictToArrayBijection
from pymc.step_methods.hmc.integration import IntegrationError
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, EvaluationTimeout, SparseGridHMC
from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.step_methods.time_limit import Deadline, TimeLimit, TimeLimited
from tests.checks import posterior_draws
from tests.models import independent_normal, slow_normal
from tests.step_methods.helpers import sample_step, start_chain

SLOW_BEYOND, SLEEP, LIMIT = 2.0, 5.0, 0.1
SLOW_POINT = np.array([3.0, 0.0])
SAMPLERS = [RNSHMC, ARNSHMC, SparseGridHMC, RNSRMHMC]


class Alarm(Exception):
    """Raised by the handler a test installs before the time limit's."""


def previous_handler(signum, frame):
    raise Alarm


@pytest.fixture
def own_handler():
    """A SIGALRM handler of the test's own in place, and no timer; both cleaned up after."""
    before = signal.signal(signal.SIGALRM, previous_handler)
    try:
        yield previous_handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def assert_restored(handler) -> None:
    assert signal.getsignal(signal.SIGALRM) is handler, "the previous handler was not put back"
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), "the timer was left running"


# --------------------------------------------------------------------------- the mechanism


def test_a_slow_call_is_abandoned_at_the_limit(own_handler):
    start = time.perf_counter()
    with pytest.raises(EvaluationTimeout, match=r"exceeded time_limit = 0\.1 s"):
        TimeLimit(LIMIT).call(time.sleep, SLEEP)
    assert time.perf_counter() - start < 1.0
    assert_restored(own_handler)


def raise_value_error():
    raise ValueError("the model failed")


def raise_interrupt():
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("function", "outcome"),
    [(lambda: 42, None), (raise_value_error, ValueError), (raise_interrupt, KeyboardInterrupt)],
    ids=["returns", "raises", "interrupted"],
)
def test_every_exit_puts_the_handler_back_and_cancels_the_timer(own_handler, function, outcome):
    if outcome is None:
        assert TimeLimit(10.0).call(function) == 42
    else:
        with pytest.raises(outcome):
            TimeLimit(10.0).call(function)
    assert_restored(own_handler)


def test_a_timer_already_running_is_resumed_with_the_time_it_had_left(own_handler):
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    assert TimeLimit(10.0).call(time.sleep, 0.2) is None
    left, interval = signal.getitimer(signal.ITIMER_REAL)
    assert 29.0 < left < 29.9 and interval == 0.0
    assert signal.getsignal(signal.SIGALRM) is own_handler


def test_a_timer_that_fell_due_during_the_call_fires_right_after_it(own_handler):
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    with pytest.raises(Alarm):  # the test's own handler
        TimeLimit(10.0).call(time.sleep, 0.2)
        time.sleep(1.0)
    assert 0.2 <= time.perf_counter() - start < 0.6, "not delayed to the end of the call"
    assert_restored(own_handler)


def test_a_model_that_swallows_the_timeout_is_still_abandoned(own_handler):
    def stubborn():
        try:
            time.sleep(SLEEP)
        except Exception:
            return 0.0  # a simulator that turns any failure into a value
        return 1.0

    start = time.perf_counter()
    with pytest.raises(EvaluationTimeout):
        TimeLimit(LIMIT).call(stubborn)
    assert time.perf_counter() - start < 1.0
    assert_restored(own_handler)


def test_outside_the_main_thread_the_limit_is_ignored_with_one_warning():
    limit, results = TimeLimit(LIMIT), []

    def evaluate_twice():
        results.extend(limit.call(time.sleep, 0.2) for _ in range(2))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = threading.Thread(target=evaluate_twice, name="sampler-thread")
        worker.start()
        worker.join()
    assert results == [None, None], "the evaluations did not run to the end"
    told = [str(w.message) for w in caught if "time_limit" in str(w.message)]
    assert len(told) == 1 and "ignored" in told[0] and "main thread" in told[0], told


# --------------------------------------------------------------------------- the step


@pytest.fixture(scope="module")
def model():
    return slow_normal(SLOW_BEYOND, SLEEP)


def test_each_exact_evaluation_of_the_step_is_limited_and_counted(model):
    with model:
        step = RNSHMC(time_limit=LIMIT)
    start_chain(step, seed=1, tune=10, draws=10)
    exact = step.exact_model
    assert exact.logp(np.zeros(2)) == 0.0  # quick points are untouched (and this compiles)
    start = time.perf_counter()
    assert exact.logp(SLOW_POINT) == -math.inf
    assert exact.potential_and_gradient(SLOW_POINT)[0] == math.inf
    q = DictToArrayBijection.map({"x": SLOW_POINT})
    with pytest.raises(IntegrationError):  # PyMC's NUTS: a divergence
        step._explorer.nuts.integrator.compute_state(q, np.zeros(2))
    assert time.perf_counter() - start < 3 * LIMIT + 2.0, "an evaluation ran to its end"
    count, first = exact.failures.take()
    assert count == 3
    assert first == "the evaluation exceeded time_limit = 0.1 s at x = [3, 0]"


def test_without_a_time_limit_the_compiled_functions_are_called_directly():
    model = slow_normal(SLOW_BEYOND, 0.3)
    with model:
        step = RNSHMC()
    assert step.time_limit is None and step.exact_model.time_limit is None
    limited = (TimeLimited, TimeLimit)
    assert not isinstance(step.exact_model._logp, limited)
    assert not isinstance(step.exact_model._joint, limited)
    assert not isinstance(step._explorer.nuts.integrator._logp_dlogp_func.function, limited)
    start_chain(step, seed=1, tune=10, draws=10)
    start = time.perf_counter()
    assert step.exact_model.logp(SLOW_POINT) == -4.5  # slow, but finished
    assert time.perf_counter() - start >= 0.3
    assert step.exact_model.failures.take() == (0, None)
    # a model raising the timeout itself, with no limit set, is an error, not a rejection
    assert not step.exact_model.failures.rejects(EvaluationTimeout(1.0))


def test_a_pickled_step_keeps_its_limit_and_compiles_afresh(model):
    with model:
        step = RNSHMC(time_limit=LIMIT)
    start_chain(step, seed=1, tune=10, draws=10)
    step.exact_model.logp(np.zeros(2))
    clone = pickle.loads(cloudpickle.dumps(step))
    assert clone.time_limit == LIMIT and not clone.exact_model.time_limit._warm
    assert clone.exact_model.logp(np.zeros(2)) == 0.0  # compiles the clone's functions
    start = time.perf_counter()
    assert clone.exact_model.logp(SLOW_POINT) == -math.inf
    assert time.perf_counter() - start < 2.0
    assert clone.exact_model.failures.take()[0] == 1


@pytest.mark.parametrize("step_class", SAMPLERS, ids=lambda c: c.__name__)
def test_every_sampler_takes_a_time_limit(step_class):
    with independent_normal():
        step = step_class(time_limit=2.5)
    assert step.time_limit == 2.5
    assert step.exact_model.time_limit.seconds == 2.5
    assert EvaluationTimeout in step.exact_model.failures.reject_errors
    assert isinstance(step.exact_model._logp, TimeLimited)


@pytest.mark.parametrize("step_class", SAMPLERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, "5", True], ids=repr)
def test_an_invalid_time_limit_is_refused_naming_it(step_class, value):
    with independent_normal(), pytest.raises(ValueError, match="time_limit must be a positive"):
        step_class(time_limit=value)


# --------------------------------------------------------------------------- sampling


sample = sample_step


def failures(idata, group: str) -> np.ndarray:
    return np.asarray(idata[group]["model_failures"].values)


@pytest.mark.parametrize("gradient", [True, False], ids=["gradients", "black-box"])
def test_slow_points_are_counted_rejections_and_the_chain_goes_on(gradient, caplog):
    model = slow_normal(SLOW_BEYOND, SLEEP, gradient=gradient)
    with model:
        step = RNSHMC(time_limit=LIMIT, exploration_steps=100)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="pymc"):
        idata = sample(model, step, tune=200, draws=150, seed=4)
    elapsed = time.perf_counter() - start
    counted = failures(idata, "warmup_sample_stats").sum() + failures(idata, "sample_stats").sum()
    assert failures(idata, "warmup_sample_stats").sum() > 0
    assert failures(idata, "sample_stats").sum() > 0, "no slow point met after tuning"
    assert elapsed < 0.2 * SLEEP * counted, f"{counted} timeouts took {elapsed:.1f} s"
    x = posterior_draws(idata, "x")
    assert x.shape == (1, 150, 2) and (x < SLOW_BEYOND).all()
    assert np.unique(x[0, :, 0]).size > 50, "the chain stopped moving"
    told = [r.getMessage() for r in caplog.records if "exceeded time_limit" in r.getMessage()]
    assert len(told) == 1 and "exceeded time_limit = 0.1 s at x = [" in told[0]


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_worker_processes_enforce_the_limit(start_method):
    # forkserver: the workers get the step pickled, and compile the model afresh
    if start_method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {start_method} here")
    model = slow_normal(SLOW_BEYOND, SLEEP)
    with model:
        step = RNSHMC(time_limit=LIMIT)
    start = time.perf_counter()
    idata = sample(model, step, tune=150, draws=100, chains=2, cores=2, seed=5, mp_ctx=start_method)
    elapsed = time.perf_counter() - start
    per_chain = failures(idata, "warmup_sample_stats").sum(axis=1)
    per_chain += failures(idata, "sample_stats").sum(axis=1)
    assert (per_chain > 0).all(), per_chain
    assert elapsed < 0.2 * SLEEP * per_chain.sum(), f"{per_chain} timeouts took {elapsed:.1f} s"
    assert (posterior_draws(idata, "x") < SLOW_BEYOND).all()


# --------------------------------------------------------------------------- no path missed


CALLS: list[bool] = []
"""Whether each evaluation of :class:`Watched` ran under an armed deadline."""


def under_deadline() -> bool:
    handler = signal.getsignal(signal.SIGALRM)
    armed = isinstance(getattr(handler, "__self__", None), Deadline)
    return armed and signal.getitimer(signal.ITIMER_REAL)[0] > 0


def warming_up() -> bool:
    """Whether the call comes from the deliberate, unlimited first call that compiles."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is ExactModel._compile.__code__:
            return True
        frame = frame.f_back
    return False


class Watched(Op):
    """The identity, noting in ``CALLS`` whether it runs under a time limit (skipping the
    warm-up); without a gradient if ``gradient=False``."""

    __props__ = ("gradient",)

    def __init__(self, gradient: bool) -> None:
        self.gradient = gradient

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        if not warming_up():
            CALLS.append(under_deadline())
        outputs[0][0] = np.array(inputs[0], copy=True)

    def grad(self, inputs, output_gradients):
        if not self.gradient:
            return [pytensor.gradient.grad_not_implemented(self, 0, inputs[0])]
        return [output_gradients[0]]


def watched_normal(gradient: bool) -> pm.Model:
    with pm.Model() as model:
        x = pm.Flat("x", shape=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            forward = Watched(gradient)(x)
        pm.Potential("likelihood", -0.5 * pt.sum(forward**2))
    return model


PATHS = {
    # exploring NUTS, surrogate draws learning with exact gradients, net draws in both halves
    "RNSHMC": (RNSHMC, True, {"safety_net": 0.3}),
    # the Laplace start, the random walk, values-only surrogate draws, net draws after tuning
    "RNSHMC-black-box": (RNSHMC, False, {"safety_net": 0.3}),
    # the grid's own evaluations while it is fitted (Laplace box: exact gradients)
    "SparseGridHMC": (SparseGridHMC, True, {"max_points": 200}),
}


@pytest.mark.parametrize("case", list(PATHS))
def test_every_evaluation_of_a_chain_runs_under_the_limit(case):
    step_class, gradient, options = PATHS[case]
    model = watched_normal(gradient)
    with model:
        # costs not weighed: a verdict for exact NUTS would leave no net draw to watch
        step = step_class(time_limit=30.0, exploration_steps=60, weigh_costs=False, **options)
    tune, draws = 160, 60
    start_chain(step, seed=2, tune=tune, draws=draws)
    CALLS.clear()
    point, phases, net_draws = model.initial_point(), set(), 0
    for draw in range(tune + draws):
        if draw == tune:
            step.stop_tuning()
        point, stats = step.step(point)
        phases.add(step.phase)
        net_draws += bool(stats[0]["safety_net"])
    assert "surrogate" in phases and (net_draws > 0 or case == "SparseGridHMC")
    assert len(CALLS) > tune, "the model was hardly evaluated"
    unlimited = CALLS.count(False)
    assert unlimited == 0, f"{unlimited} of {len(CALLS)} evaluations ran without the limit"
