"""Faults of the workers of a population: a worker killed mid-run, same draws for the same seed."""

from __future__ import annotations

import concurrent.futures
import os
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_rnshmc import RNSHMC, PooledSurrogate, SurrogateWarning
from pymc_rnshmc.hmc.corrections import Evaluation
from pymc_rnshmc.step_methods.evaluators import (
    DaskEvaluator,
    InProcessEvaluator,
    ProcessEvaluator,
)
from tests.checks import posterior_draws

TUNE, DRAWS, CHAINS, SEED = 150, 100, 2, 3
KILL_AT_CALL = 5
"""The killed worker dies at its fifth evaluation, not its first: mid-run, not at start-up."""


class DiesOnceInAWorker(Op):
    """The identity on a tensor that kills the worker process evaluating it, once per run.

    In a process other than the one that built the model, at that process's ``kill_at``-th
    evaluation, the first worker to create ``marker`` (atomically) exits at once, as a worker
    killed by the system would. Elsewhere, or once the marker exists, it is the identity (with
    the identity's gradient).
    """

    __props__ = ("marker", "parent_pid", "kill_at")

    def __init__(self, marker: str, parent_pid: int, kill_at: int = KILL_AT_CALL) -> None:
        self.marker = marker
        self.parent_pid = parent_pid
        self.kill_at = kill_at
        self.calls = 0

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        self.calls += 1
        if os.getpid() != self.parent_pid and self.calls >= self.kill_at and self._claim():
            os._exit(1)
        outputs[0][0] = np.array(inputs[0], copy=True)

    def _claim(self) -> bool:
        """Create the marker; ``False`` if it exists (a worker died already, or not this run)."""
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def pullback(self, inputs, outputs, cotangents):
        return [cotangents[0]]

    def grad(self, inputs, output_grads):  # PyTensor 2
        return [output_grads[0]]


def fragile_model(marker, kill_at: int = KILL_AT_CALL) -> pm.Model:
    """``x ~ N(0, 1)``, two coordinates, its density through :class:`DiesOnceInAWorker`."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=2)
        with warnings.catch_warnings():  # PyTensor 3's Numba object-mode notice
            warnings.simplefilter("ignore", UserWarning)
            passed = DiesOnceInAWorker(str(marker), os.getpid(), kill_at)(x)
        pm.Potential("likelihood", pm.logp(pm.Normal.dist(0.0, 1.0, shape=2), passed).sum())
    return model


def run(model, evaluator, draws: int = DRAWS):
    with model:
        return pm.sample(
            step=PooledSurrogate(
                RNSHMC(exploration_steps=60, weigh_costs=False), evaluator=evaluator
            ),
            tune=TUNE,
            draws=draws,
            chains=CHAINS,
            cores=1,
            random_seed=SEED,
            progressbar=False,
            compute_convergence_checks=False,
        )


def restart_warnings(caught) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, SurrogateWarning) and "worker process" in str(w.message)
    ]


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    """Draws of a run in this process (no worker to kill), the reference."""
    marker = tmp_path_factory.mktemp("undisturbed") / "died"
    idata = run(fragile_model(marker), InProcessEvaluator())
    assert not marker.exists()
    return posterior_draws(idata, "x")


def test_a_killed_worker_process_is_replaced_and_the_draws_are_unchanged(tmp_path, undisturbed):
    # (test_population checks that undisturbed worker processes give the in-process draws)
    marker = tmp_path / "died"  # the first worker to reach its fifth evaluation dies
    evaluator = ProcessEvaluator(workers=2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            killed = run(fragile_model(marker), evaluator)
    finally:
        evaluator.close()
    assert marker.exists(), "no worker died: the test tested nothing"
    assert len(restart_warnings(caught)) == 1, restart_warnings(caught)
    np.testing.assert_array_equal(posterior_draws(killed, "x"), undisturbed)


KEPT_DRAWS, KILL_WHEN_KEPT = 400, 1500
"""With one worker, tuning takes it 900-1000 evaluations (PyMC 6.4, seed 3) and the kept draws
about 1500 more: its 1500th is a kept draw's."""


def test_a_worker_killed_among_the_kept_draws_is_replaced_and_the_draws_are_unchanged(tmp_path):
    # after tuning the chains stream (draw_stream): each task is sent again on the new pool
    reference = run(fragile_model(tmp_path / "unused"), InProcessEvaluator(), KEPT_DRAWS)
    marker = tmp_path / "died"
    evaluator = ProcessEvaluator(workers=1)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            killed = run(fragile_model(marker, KILL_WHEN_KEPT), evaluator, KEPT_DRAWS)
    finally:
        evaluator.close()
    assert marker.exists(), "no worker died: the test tested nothing"
    assert [message.split(";")[0] for message in restart_warnings(caught)] == [
        "A worker process of the ProcessEvaluator died during the pooled chains' streamed draws"
    ]
    np.testing.assert_array_equal(posterior_draws(killed, "x"), posterior_draws(reference, "x"))


def test_workers_that_keep_dying_stop_the_sampler_with_advice(tmp_path):
    evaluator = ProcessEvaluator(workers=1, restarts=0)
    try:
        with pytest.raises(RuntimeError, match=r"tried: 1 time, with restarts=0.*more restarts"):
            run(fragile_model(tmp_path / "died"), evaluator)
    finally:
        evaluator.close()
    assert (tmp_path / "died").exists()


class Failures:
    """A chain's failure count, as the sampler's: what each task reports, what was added."""

    def __init__(self) -> None:
        self.added: list[tuple[int, str]] = []

    def take(self) -> tuple[int, str]:
        return 1, "one failure per evaluation"

    def add(self, count: int, first: str) -> None:
        self.added.append((count, first))


class FragileExactModel:
    """An exact model whose evaluation at ``x[0] == dies_at`` kills its worker, once."""

    def __init__(self, marker: str, dies_at: float) -> None:
        self.op = DiesOnceInAWorker(marker, os.getpid())
        self.dies_at = dies_at
        self.failures = Failures()

    logp_by_joint = False

    def warm_up(self) -> None:
        """Nothing to compile."""

    def evaluate(self, position, gradient):
        if position[0] == self.dies_at and os.getpid() != self.op.parent_pid and self.op._claim():
            os._exit(1)
        return Evaluation(position, float(np.sum(position)))


class FragileSampler:
    def __init__(self, marker: str, dies_at: float) -> None:
        self.exact_model = FragileExactModel(marker, dies_at)


def test_a_batch_cut_short_by_a_dead_worker_counts_each_chains_failures_once(tmp_path):
    sampler = FragileSampler(str(tmp_path / "died"), dies_at=1.0)
    chains = [FragileExactModel("unused", np.nan) for _ in range(3)]
    requests = [(chain, np.array([float(i), 2.0]), False) for i, chain in enumerate(chains)]
    evaluator = ProcessEvaluator(workers=1)  # the first request is back before the second kills
    try:
        evaluator.start(sampler)
        with pytest.warns(SurrogateWarning, match="died during a batch of 3"):
            evaluations = evaluator.evaluate(requests)
    finally:
        evaluator.close()
    assert (tmp_path / "died").exists()
    assert [evaluation.logp for evaluation in evaluations] == [2.0, 3.0, 4.0]
    assert all(len(chain.failures.added) == 1 for chain in chains)


@pytest.mark.parametrize("restarts", [-1, 1.5, True, "2"])
def test_restarts_must_be_a_non_negative_integer(restarts):
    with pytest.raises(ValueError, match="restarts"):
        ProcessEvaluator(restarts=restarts)


class _ScatterCountingClient:
    """A Dask client stand-in that counts what is scattered (no cluster)."""

    def __init__(self) -> None:
        self.scattered: list = []

    def scatter(self, data, broadcast: bool):
        self.scattered.append((data, broadcast))
        return f"payload-{len(self.scattered)}"


def _lost_batches(evaluator: DaskEvaluator, losses: int):
    """A batch sender that loses the sampler ``losses`` times, then doubles each request."""
    sent_with = []

    def send(submit, requests):
        sent_with.append(evaluator._payload)
        if len(sent_with) <= losses:  # the workers that held the sampler died
            raise concurrent.futures.CancelledError("already forgotten")
        return [request * 2 for request in requests]

    return send, sent_with


@pytest.mark.parametrize("losses", [1, 2])
def test_a_batch_whose_scattered_sampler_was_lost_is_sent_once_more_with_it(losses):
    client = _ScatterCountingClient()
    evaluator = DaskEvaluator(client)
    evaluator.start({"a sampler": 1})
    send, sent_with = _lost_batches(evaluator, losses)
    if losses == 1:
        assert evaluator._batch(send, [1, 2]) == [2, 4]
    else:  # lost again: raised, not looped
        with pytest.raises(concurrent.futures.CancelledError):
            evaluator._batch(send, [1, 2])
    assert sent_with == ["payload-1", "payload-2"]
    assert client.scattered[0] == client.scattered[1] and client.scattered[1][1] is True


def test_a_dask_worker_killed_mid_run_is_replaced_and_the_draws_are_unchanged(
    tmp_path, undisturbed
):
    """The DaskEvaluator's draws are the in-process ones, even when a worker dies mid-run."""
    distributed = pytest.importorskip("distributed")
    marker = tmp_path / "died"
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        killed = run(fragile_model(marker), DaskEvaluator(client))
    assert marker.exists(), "no worker died: the test tested nothing"
    np.testing.assert_array_equal(posterior_draws(killed, "x"), undisturbed)


def test_a_stream_that_lost_the_scattered_sampler_is_given_it_again_once_in_a_row():
    client = _ScatterCountingClient()
    evaluator = DaskEvaluator(client)
    evaluator.start({"a sampler": 1})
    lost = concurrent.futures.CancelledError("already forgotten")
    assert evaluator.recover(lost, attempt=1) and evaluator._payload == "payload-2"
    assert not evaluator.recover(lost, attempt=2)  # lost again before any task came back
    assert not evaluator.recover(ValueError("the model's own error"), attempt=1)
    assert len(client.scattered) == 2


def test_a_process_pool_recovers_from_a_dead_worker_only():
    evaluator = ProcessEvaluator(workers=1)
    assert not evaluator.recover(ValueError("the model's own error"), attempt=1)
