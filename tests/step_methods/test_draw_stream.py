"""Draws of pooled chains, streamed: no chain waits for another, the same draws in order."""

from __future__ import annotations

import concurrent.futures
from concurrent.futures.process import BrokenProcessPool
from types import SimpleNamespace

import numpy as np
import pytest

from pymc_rnshmc.step_methods.draw_stream import DrawStream


class Failures:
    def __init__(self) -> None:
        self.added = 0

    def add(self, count: int, first) -> None:
        self.added += count


class CountingChain:
    """A chain whose draw adds its evaluation (``x + 1``) to its point: draws count up."""

    def __init__(self) -> None:
        self.exact_model = SimpleNamespace(failures=Failures(), logp_by_joint=False)

    def begin(self, q0, tune, rng, hooks):
        assert not tune
        return SimpleNamespace(
            q0=q0, exact_phase=None, position_to_evaluate=q0 + 1.0, wants_gradient=False
        )


class SimulatedCluster:
    """A streaming evaluator on unlimited workers, its clock simulated: chain ``c``'s task
    (told by its position's sign) takes ``seconds[c]``; the first task due is done first."""

    def __init__(self, seconds: dict[bool, float], breaks_at: int | None = None) -> None:
        self.seconds, self.breaks_at = seconds, breaks_at
        self.clock, self.sent, self.recovered = 0.0, 0, 0
        self.due: dict[concurrent.futures.Future, tuple[float, float]] = {}

    def submit(self, function, position, gradient, by_joint):
        future = concurrent.futures.Future()
        self.sent += 1
        slow = bool(position[0] < 0)
        self.due[future] = (self.clock + self.seconds[slow], float(position[0]))
        return future

    def first_done(self, futures):
        future = min(futures, key=lambda f: self.due[f][0])
        self.clock, value = self.due.pop(future)
        if self.kills_its_worker(value):
            future.set_exception(BrokenProcessPool("a worker died"))
        else:
            future.set_result((value, (0, None)))
        return {future}

    def kills_its_worker(self, value: float) -> bool:
        """Whether the task done now (at ``value``) broke the pool: once, at ``breaks_at``."""
        return self.breaks_at is not None and self.sent >= self.breaks_at and not self.recovered

    def recover(self, error, attempt):
        self.recovered += 1
        return isinstance(error, BrokenProcessPool) and attempt == 1


def stream(cluster, draws_left, chains=2):
    """Chain 0 starts at 0 and counts up fast; chain 1 starts at -1000 and counts up slowly."""

    def finish(index, begun, evaluation, draw, started):
        return begun.q0 + 0 * evaluation + 1.0, {"chain": index, "clock": cluster.clock}

    starts = [np.array([0.0]), np.array([-1000.0])][:chains]
    parts = [CountingChain() for _ in starts]
    return DrawStream(parts, [None] * chains, [None] * chains, starts, cluster, draws_left, finish)


def take(kept: DrawStream, iterations: int) -> list[list[float]]:
    """PyMC's iterations: chain 0's draw, then chain 1's, ``iterations`` times."""
    draws = [[], []]
    for _ in range(iterations):
        for index in (0, 1):
            draws[index].append(float(kept.next_draw(index)[0][0]))
    return draws


def test_a_fast_chain_runs_ahead_of_a_slow_one_with_the_same_draws():
    cluster = SimulatedCluster({False: 1.0, True: 10.0})
    kept = stream(cluster, draws_left=20)
    draws = take(kept, 3)
    assert draws == [[1.0, 2.0, 3.0], [-999.0, -998.0, -997.0]]  # each chain's own sequence
    # while chain 1 made its 3 draws (30 s), chain 0 made all its 20 (in lockstep: 3)
    assert len(kept.ready[0]) == 17 and kept.made == [20, 3]
    assert cluster.clock == pytest.approx(30.0)


def test_with_the_draws_left_unknown_no_chain_draws_past_pymcs_iteration():
    cluster = SimulatedCluster({False: 1.0, True: 10.0})
    kept = stream(cluster, draws_left=None)
    assert take(kept, 3) == [[1.0, 2.0, 3.0], [-999.0, -998.0, -997.0]]
    # the last iteration's draws were the last begun: nothing in flight, nothing made ahead
    assert kept.made == [3, 3] and kept.tasks == {} and cluster.sent == 6


def test_no_chain_draws_past_what_it_was_told():
    kept = stream(SimulatedCluster({False: 1.0, True: 1.0}), draws_left=2)
    take(kept, 2)
    assert kept.spent  # the pool then goes back to lockstep (or PyMC stops)
    with pytest.raises(RuntimeError, match="more draws"):
        kept.next_draw(0)


def test_tasks_lost_with_a_worker_are_sent_again_and_give_the_same_draws():
    cluster = SimulatedCluster({False: 1.0, True: 3.0}, breaks_at=5)
    kept = stream(cluster, draws_left=10)
    assert take(kept, 10) == take(stream(SimulatedCluster({False: 1.0, True: 3.0}), 10), 10)
    assert cluster.recovered == 1


def test_a_loss_the_evaluator_cannot_recover_from_is_raised_and_the_tasks_dropped():
    cluster = SimulatedCluster({False: 1.0, True: 3.0}, breaks_at=1)
    cluster.recover = lambda error, attempt: False
    kept = stream(cluster, draws_left=10)
    with pytest.raises(BrokenProcessPool):
        take(kept, 10)
    assert kept.tasks == {}


class PoisonedCluster(SimulatedCluster):
    """Chain 1's task kills its worker every time; chain 0's come back in between."""

    def kills_its_worker(self, value: float) -> bool:
        return value < 0

    def recover(self, error, attempt):
        self.recovered += 1
        return attempt <= 2  # ProcessEvaluator(restarts=2)


def test_a_task_that_kills_its_worker_each_time_stops_the_stream_after_its_restarts():
    cluster = PoisonedCluster({False: 1.0, True: 10.0})
    kept = stream(cluster, draws_left=1000)
    with pytest.raises(BrokenProcessPool):
        take(kept, 1000)
    assert cluster.recovered == 3 and kept.tasks == {}
