"""A real UM-Bridge server for the tests, on the loopback address only.

``python -m tests.served.umbridge_server PORT`` serves, with ``umbridge.serve_models`` and four
worker threads:

- ``forward``: ``f(theta) = [theta0 + 0.3 theta1**2, theta1 - 0.2 theta0, sin(theta0) + theta1]``
  with its gradient; ``config={"delay": s}`` sleeps ``s`` per call; a ``theta0`` above
  ``config["nan_above"]`` gives NaN outputs, below ``config["raise_below"]`` an exception;
- ``values``: the same outputs, without a gradient;
- ``stalls``: ``forward``'s outputs for the first ``config["answers"]`` calls of each
  ``config["run"]``, then no answer for ``config["stall"]`` seconds;
- ``in_flight``: the most ``forward`` calls that were running at once (and resets it).

umbridge 1.2.10 listens on every interface; the tests' server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections import Counter
from typing import ClassVar

import aiohttp.web
import numpy as np
import umbridge


def forward_map(theta: np.ndarray) -> np.ndarray:
    t0, t1 = theta
    return np.array([t0 + 0.3 * t1**2, t1 - 0.2 * t0, np.sin(t0) + t1])


def forward_jacobian(theta: np.ndarray) -> np.ndarray:
    t0, t1 = theta
    return np.array([[1.0, 0.6 * t1], [-0.2, 1.0], [np.cos(t0), 1.0]])


class Forward(umbridge.Model):
    lock = threading.Lock()
    running = 0
    most = 0

    def __init__(self, name: str = "forward", gradient: bool = True) -> None:
        super().__init__(name)
        self.has_gradient = gradient

    def get_input_sizes(self, config):
        return [2]

    def get_output_sizes(self, config):
        return [3]

    def __call__(self, parameters, config):
        theta = np.asarray(parameters[0], dtype=float)
        with Forward.lock:
            Forward.running += 1
            Forward.most = max(Forward.most, Forward.running)
        try:
            time.sleep(float(config.get("delay", 0.0)))
            if theta[0] < config.get("raise_below", -np.inf):
                raise RuntimeError("the solver diverged")
            if theta[0] > config.get("nan_above", np.inf):
                return [[float("nan")] * 3]
            return [forward_map(theta).tolist()]
        finally:
            with Forward.lock:
                Forward.running -= 1

    def gradient(self, out_wrt, in_wrt, parameters, sens, config):
        theta = np.asarray(parameters[0], dtype=float)
        return (np.asarray(sens) @ forward_jacobian(theta)).tolist()

    def supports_evaluate(self):
        return True

    def supports_gradient(self):
        return self.has_gradient


class Stalls(Forward):
    calls: ClassVar[Counter] = Counter()

    def __call__(self, parameters, config):
        run = config.get("run", "")
        with Forward.lock:
            Stalls.calls[run] += 1
            calls = Stalls.calls[run]
        if calls > config.get("answers", 0):
            time.sleep(float(config.get("stall", 3600.0)))
        return super().__call__(parameters, config)


class InFlight(umbridge.Model):
    def get_input_sizes(self, config):
        return [1]

    def get_output_sizes(self, config):
        return [1]

    def __call__(self, parameters, config):
        with Forward.lock:
            most, Forward.most = Forward.most, 0
        return [[float(most)]]

    def supports_evaluate(self):
        return True


def serve(port: int) -> None:
    aiohttp.web.run_app = functools.partial(aiohttp.web.run_app, host="127.0.0.1", print=None)
    models = [
        Forward(),
        Forward("values", gradient=False),
        Stalls("stalls"),
        InFlight("in_flight"),
    ]
    umbridge.serve_models(models, port=port, max_workers=4)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
