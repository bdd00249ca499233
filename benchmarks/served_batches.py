"""A served model's requests in flight together: batches of K evaluations over UM-Bridge.

    python -m benchmarks.served_batches                       # K = 1, 2, 4, 8; 1 s a solve
    python -m benchmarks.served_batches --chains 1,2 --seconds 0.2 --output smoke_served

An UM-Bridge server (``umbridge.serve_models`` with ``max_workers`` = the largest K, on
127.0.0.1, in its own process) serves a forward model that sleeps ``--seconds`` per call and
returns its input. A PyMC model of ``d = 5`` parameters calls it through
:class:`~pymc_rnshmc.served.UMBridgeOp`. Per K: a
:class:`~pymc_rnshmc.step_methods.evaluators.ProcessEvaluator` with K workers gets
``--rounds`` batches of K exact evaluations, as the pooled chains' rounds send them; the first
batch (the workers unpickling the model) is not counted. Reported: the median wall time of a
batch, and the parallel efficiency ``seconds / batch`` (1 when the K requests overlap
perfectly), besides the median time of one request with no sleep (the wire's cost).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pymc as pm

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.exceptions import ServedModelUnavailable
from pymc_rnshmc.served import UMBridgeModel, UMBridgeOp
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator

DIM = 5


def serve(port: int, workers: int) -> None:
    import aiohttp.web
    import umbridge

    class Sleeping(umbridge.Model):
        def get_input_sizes(self, config):
            return [DIM]

        def get_output_sizes(self, config):
            return [DIM]

        def __call__(self, parameters, config):
            time.sleep(float(config.get("seconds", 0.0)))
            return [list(parameters[0])]

        def supports_evaluate(self):
            return True

    aiohttp.web.run_app = functools.partial(aiohttp.web.run_app, host="127.0.0.1", print=None)
    umbridge.serve_models([Sleeping("sleeping")], port=port, max_workers=workers)


def start_server(workers: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "benchmarks.served_batches", "--serve", str(port)]
    server = subprocess.Popen([*command, "--server-workers", str(workers)])
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if server.poll() is not None:
            break
        try:
            UMBridgeModel(url, "sleeping", retries=0, connect_timeout=1.0)
            return server, url
        except ServedModelUnavailable:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the UM-Bridge server did not start on {url}")


def served_normal(url: str, seconds: float) -> pm.Model:
    forward = UMBridgeModel(url, "sleeping", {"seconds": seconds}, timeout=60.0)
    with pm.Model() as model:
        x = pm.Flat("x", shape=DIM)
        pm.Potential("likelihood", -0.5 * (UMBridgeOp(forward)(x) ** 2).sum())
    return model


def request_seconds(url: str, calls: int = 200) -> float:
    """Median seconds of one ``Evaluate`` request with no sleep (the protocol's own cost)."""
    forward = UMBridgeModel(url, "sleeping")
    seconds = []
    for point in np.random.default_rng(0).standard_normal((calls, DIM)):
        start = time.perf_counter()
        forward.evaluate([point])
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def batch_seconds(url: str, chains: int, seconds: float, rounds: int) -> list[float]:
    with served_normal(url, seconds), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = RNSHMC()
    evaluator = ProcessEvaluator(workers=chains)
    rng = np.random.default_rng(1)
    try:
        evaluator.start(sampler)
        times = []
        for _ in range(rounds + 1):
            batch = [(sampler.exact_model, rng.standard_normal(DIM), False) for _ in range(chains)]
            start = time.perf_counter()
            evaluator.evaluate(batch)
            times.append(time.perf_counter() - start)
    finally:
        evaluator.close()
    return times[1:]  # the first: each worker unpickles the model


def markdown(results: dict) -> str:
    lines = [
        f"## Batches of K requests to a served model, {results['date']}",
        "",
        f"pymc {results['pymc']}; {results['machine']}; an UM-Bridge server on 127.0.0.1 "
        f"answering {results['server workers']} requests at once; {results['seconds']} s a "
        f"solve; one request without a solve: {1000 * results['request s']:.1f} ms (median).",
        "",
        "| K (chains = workers) | batch s (median) | ideal s | parallel efficiency |",
        "|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['chains']} | {row['median s']:.3f} | {results['seconds']:.3f} | "
            f"{results['seconds'] / row['median s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, metavar="PORT", help="only serve the model")
    parser.add_argument("--server-workers", type=int, default=8)
    parser.add_argument("--chains", default="1,2,4,8")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default="served_batches")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.server_workers)
        return
    chains = [int(k) for k in args.chains.split(",")]
    server, url = start_server(max(chains))
    try:
        results = run_metadata(seconds=args.seconds, rounds=args.rounds)
        results["server workers"] = max(chains)
        results["request s"] = request_seconds(url)
        results["rows"] = []
        for k in chains:
            times = batch_seconds(url, k, args.seconds, args.rounds)
            results["rows"].append({"chains": k, "times": times, "median s": np.median(times)})
            write_results(args.output, results, markdown(results))
            print(markdown(results), flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
