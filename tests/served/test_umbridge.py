"""Models served over UM-Bridge: the client, the Op, and sampling a real server on localhost."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_rnshmc
from pymc_rnshmc import RNSHMC, ModelEvaluationError
from pymc_rnshmc.exceptions import ServedModelError, ServedModelUnavailable
from pymc_rnshmc.served import UMBridgeModel, UMBridgeOp
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator
from pymc_rnshmc.step_methods.exact_model import has_gradient
from tests.checks import assert_moments, posterior_draws
from tests.served.umbridge_server import forward_jacobian, forward_map

pytest.importorskip("umbridge")
pytest.importorskip("requests")

ROOT = Path(__file__).resolve().parents[2]
SIGMA = 0.3
OBSERVED = forward_map(np.array([0.5, -0.3])) + np.array([0.12, -0.25, 0.05])
THETA = np.array([0.4, -0.7])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real UM-Bridge server on 127.0.0.1 in its own process, for this module."""
    port = free_port()
    log = (tmp_path_factory.mktemp("umbridge") / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.served.umbridge_server", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            UMBridgeModel(url, "forward", retries=0, connect_timeout=1.0)
            break
        except ServedModelUnavailable:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"the UM-Bridge server did not start (log: {log.name})")
            time.sleep(0.2)
    yield url
    process.kill()
    process.wait()
    log.close()


def reference_moments() -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and sd of theta by quadrature on a grid (independent of any sampler)."""
    grid = np.linspace(-4.0, 4.0, 801)
    t0, t1 = np.meshgrid(grid, grid, indexing="ij")
    predicted = np.stack([t0 + 0.3 * t1**2, t1 - 0.2 * t0, np.sin(t0) + t1])
    residual = (predicted - OBSERVED[:, None, None]) / SIGMA
    log_density = -0.5 * (t0**2 + t1**2) - 0.5 * (residual**2).sum(axis=0)
    weight = np.exp(log_density - log_density.max())
    weight /= weight.sum()
    mean = np.array([(weight * t0).sum(), (weight * t1).sum()])
    second = np.array([(weight * t0**2).sum(), (weight * t1**2).sum()])
    return mean, np.sqrt(second - mean**2)


def served_regression(model: UMBridgeModel) -> pm.Model:
    with pm.Model() as regression:
        theta = pm.Normal("theta", 0.0, 1.0, shape=2)
        pm.Normal("y", UMBridgeOp(model)(theta), SIGMA, observed=OBSERVED)
    return regression


def sample_chains(step, chains: int, seed: int, tune: int = 300, draws: int = 300):
    """``pm.sample`` of the model in context, one chain after the other."""
    return pm.sample(
        step=step,
        tune=tune,
        draws=draws,
        chains=chains,
        cores=1,
        random_seed=seed,
        progressbar=False,
        compute_convergence_checks=False,
    )


def assert_posterior(idata, label: str) -> None:
    mean, sd = reference_moments()
    draws = posterior_draws(idata, "theta")
    for i in range(2):
        assert_moments(draws[..., i], mean[i], sd[i], f"{label} theta[{i}]", min_ess=150)


# --------------------------------------------------------------------------- the client
def test_the_client_reads_sizes_outputs_and_gradients(server):
    forward = UMBridgeModel(server, "forward")
    assert forward.input_sizes == (2,) and forward.output_sizes == (3,)
    assert forward.supports_gradient
    assert not UMBridgeModel(server, "values").supports_gradient
    (output,) = forward.evaluate([THETA])
    np.testing.assert_allclose(output, forward_map(THETA), rtol=1e-15)
    sens = np.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(
        forward.gradient(0, 0, [THETA], sens), sens @ forward_jacobian(THETA), rtol=1e-15
    )


def test_the_client_says_what_went_wrong(server):
    with pytest.raises(ValueError, match=r"does not serve a model named 'banana'.*forward"):
        UMBridgeModel(server, "banana")
    with pytest.raises(ValueError, match="takes inputs of sizes"):
        UMBridgeModel(server, "forward").evaluate([np.zeros(3)])
    # NaN outputs (written by umbridge as bare nan) come back as NaN: a counted rejection later
    (output,) = UMBridgeModel(server, "forward", {"nan_above": 0.0}).evaluate([THETA])
    assert np.isnan(output).all()
    # the model raising on the server is the model's failure at those parameters
    with pytest.raises(ServedModelError, match="HTTP 500"):
        UMBridgeModel(server, "forward", {"raise_below": 1.0}).evaluate([THETA])
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        UMBridgeModel(server, "forward", timeout=0)


def test_a_server_that_is_not_there_is_unavailable_at_once():
    start = time.monotonic()
    with pytest.raises(ServedModelUnavailable, match="refused or dropped 2 connections"):
        UMBridgeModel(f"http://127.0.0.1:{free_port()}", "forward", retries=1)
    assert time.monotonic() - start < 5.0


# --------------------------------------------------------------------------- the Op
def test_the_op_is_the_forward_model_with_the_servers_gradient(server):
    x = pt.dvector("x")
    served = UMBridgeOp(UMBridgeModel(server, "forward"))(x)
    weights = np.array([1.0, -2.0, 0.5])
    value_and_gradient = pytensor.function([x], [served, pytensor.grad(pt.dot(weights, served), x)])
    value, gradient = value_and_gradient(THETA)
    np.testing.assert_allclose(value, forward_map(THETA), rtol=1e-15)
    np.testing.assert_allclose(gradient, weights @ forward_jacobian(THETA), rtol=1e-14)


def test_without_a_served_gradient_the_model_has_none(server):
    with served_regression(UMBridgeModel(server, "values")) as regression:
        assert not has_gradient(regression, regression.value_vars)


def test_the_op_pickles_without_its_connections(server):
    op = UMBridgeOp(UMBridgeModel(server, "forward"))
    op.model.evaluate([THETA])  # opens this thread's session
    copy = pickle.loads(pickle.dumps(op))
    assert copy == op
    np.testing.assert_array_equal(copy.model.evaluate([THETA])[0], forward_map(THETA))


# --------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("name", ["forward", "values"])
def test_a_served_model_samples_the_posterior(server, name):
    """With the server's gradient (NUTS exploration) and without (random-walk exploration)."""
    with served_regression(UMBridgeModel(server, name)):
        idata = sample_chains(RNSHMC(weigh_costs=False), chains=2, seed=3, tune=300, draws=400)
    assert_posterior(idata, name)


def test_pooled_chains_send_their_requests_to_the_server_concurrently(server):
    in_flight = UMBridgeModel(server, "in_flight")
    in_flight.evaluate([np.zeros(1)])  # reset the server's count
    # forked workers: each must open its own connection, not share the parent's socket
    forward = UMBridgeModel(server, "forward", {"delay": 0.002})
    forward.evaluate([THETA])  # the parent's connection, open when the workers fork
    evaluator = ProcessEvaluator(workers=2, context="fork")
    with served_regression(forward):
        try:
            idata = pymc_rnshmc.sample(
                tune=100,
                draws=20,
                chains=2,
                random_seed=4,
                progressbar=False,
                compute_convergence_checks=False,
                evaluator=evaluator,
            )
        finally:
            evaluator.close()
    assert posterior_draws(idata, "theta").shape == (2, 20, 2)
    (most,) = in_flight.evaluate([np.zeros(1)])
    assert most[0] >= 2, "the two workers' requests overlapped on the server"


def test_a_server_that_stops_answering_stops_sampling_with_the_draws_so_far(server):
    config = {"answers": 300, "run": uuid.uuid4().hex, "stall": 20.0}
    stalls = UMBridgeModel(server, "stalls", config, timeout=1.0)
    start = time.monotonic()
    with (
        served_regression(stalls),
        pytest.raises(ModelEvaluationError, match="did not answer") as caught,
    ):
        # even a listed ConnectionError is no rejection: silence says nothing of the posterior
        sample_chains(RNSHMC(reject_errors=(ConnectionError,)), chains=1, seed=5)
    assert time.monotonic() - start < 60.0
    assert isinstance(caught.value.__cause__, ServedModelUnavailable)
    assert 0 < len(caught.value.draws["theta"]) < 600


def test_pooled_chains_stopped_by_the_server_keep_every_chains_draws(server):
    config = {"answers": 400, "run": uuid.uuid4().hex, "stall": 20.0}
    stalls = UMBridgeModel(server, "stalls", config, timeout=1.0)
    with (
        served_regression(stalls),
        pytest.raises(ModelEvaluationError, match=r"2 chains' .* draws so far") as caught,
    ):
        pymc_rnshmc.sample(tune=300, draws=300, chains=2, random_seed=6, progressbar=False, cores=1)
    assert caught.value.chains == 2
    draws = caught.value.draws["theta"]
    assert draws.shape[0] == 2 and 0 < draws.shape[1] < 600 and draws.shape[2] == 2


def test_a_step_time_limit_counts_a_slow_served_evaluation_as_a_rejection(server):
    """``time_limit`` means what it says for a served model too: past it, a counted rejection.

    (Without one, the client's own ``timeout`` stops sampling: the tests above.)
    """
    config = {"answers": 10, "run": uuid.uuid4().hex, "stall": 3.0}
    with served_regression(UMBridgeModel(server, "stalls", config, timeout=30.0)):
        exact_model = RNSHMC(time_limit=0.5).exact_model
    logps = []
    for _ in range(12):  # the construction made a few of the answered calls already
        start = time.monotonic()
        logps.append(exact_model.logp(THETA))
        assert time.monotonic() - start < 2.5
        if logps[-1] == -np.inf:
            break
    assert logps[-1] == -np.inf and exact_model.failures.count == 1
    assert "time_limit" in exact_model.failures.first


def test_each_process_opens_its_own_connection(server, monkeypatch):
    forward = UMBridgeModel(server, "forward")
    opened = forward._session()
    assert forward._session() is opened
    monkeypatch.setattr("os.getpid", lambda: -1)  # as in a child forked by pm.sample(cores=n)
    assert forward._session() is not opened


@pytest.mark.parametrize(
    ("status", "text", "error", "match"),
    [
        (503, "Service Unavailable", ServedModelUnavailable, "answered HTTP 503"),
        (502, "Bad Gateway", ServedModelUnavailable, "answered HTTP 502"),
        (200, "<html>not json</html>", ServedModelError, "no JSON"),
        (400, '{"error": "bad"}', ServedModelError, "answered Error: bad"),
    ],
)
def test_answers_that_are_no_model_output_say_why(server, status, text, error, match):
    forward = UMBridgeModel(server, "forward")
    response = types.SimpleNamespace(status_code=status, text=text)
    with pytest.raises(error, match=match):
        forward._answer(response)
