"""Sample a PDE forward model served over UM-Bridge, with pooled chains whose requests overlap.

    python examples/umbridge_pde.py                    # d = 20, 30 x 30 mesh, 2 chains, 2 workers
    python examples/umbridge_pde.py --serve 4242       # only serve the forward model (Ctrl-C stops)
    python examples/umbridge_pde.py --url http://host:4242   # sample a server that already runs
    python examples/umbridge_pde.py --n-cells 8 --n-modes 3 --tune 300 --draws 100   # smoke

The forward model is the RNS-HMC paper's elliptic PDE (the KL weights ``theta`` to the solution
at 121 points, with the adjoint as UM-Bridge's ``Gradient``), served by ``umbridge`` in its own
process, as a solver on another machine or in a container would be. The PyMC model around it
(prior, Gaussian likelihood) is built here with :class:`pymc_rnshmc.served.UMBridgeOp`, and
:func:`pymc_rnshmc.sample` samples it with two chains sharing one surrogate; each round's exact
evaluations go to the server at once from two worker processes (``ProcessEvaluator``). The
same model with the solver in this process is sampled the same way; the script prints both
whole calls and the largest gap between the two runs' posterior means, in standard errors.
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm

import pymc_rnshmc
from pymc_rnshmc.exceptions import ServedModelUnavailable
from pymc_rnshmc.served import UMBridgeModel, UMBridgeOp
from pymc_rnshmc.step_methods.evaluators import ProcessEvaluator
from pymc_rnshmc.workloads.elliptic_pde import (
    EllipticPDEForwardModel,
    KarhunenLoeveExpansion,
    elliptic_pde,
    synthetic_data,
)

PRIOR_SD, NOISE_SD, SEED = 0.5, 0.1, 2017


def serve(port: int, host: str, n_cells: int, n_modes: int) -> None:
    """Serve the PDE's observations and their adjoint gradient as UM-Bridge model "forward"."""
    import aiohttp.web
    import umbridge

    solver = EllipticPDEForwardModel(n_cells, expansion=KarhunenLoeveExpansion(n_modes))

    class Forward(umbridge.Model):
        def get_input_sizes(self, config):
            return [n_modes]

        def get_output_sizes(self, config):
            return [solver.n_observations]

        def __call__(self, parameters, config):
            return [solver.observe(np.asarray(parameters[0])).tolist()]

        def gradient(self, out_wrt, in_wrt, parameters, sens, config):
            theta = np.asarray(parameters[0])
            return solver.vector_jacobian_product(theta, np.asarray(sens)).tolist()

        def supports_evaluate(self):
            return True

        def supports_gradient(self):
            return True

    # umbridge 1.2.10's serve_models has no host argument and listens on every interface
    aiohttp.web.run_app = functools.partial(aiohttp.web.run_app, host=host, print=None)
    print(f"serving 'forward' on http://{host}:{port}", flush=True)
    umbridge.serve_models([Forward("forward")], port=port, max_workers=4)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(arguments) -> tuple[subprocess.Popen, str]:
    """This script with ``--serve`` in its own process; its URL once it answers."""
    port = free_port() if arguments.port is None else arguments.port
    command = [sys.executable, __file__, "--serve", str(port)]
    command += [f"--n-cells={arguments.n_cells}", f"--n-modes={arguments.n_modes}"]
    server = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            UMBridgeModel(url, "forward", retries=0, connect_timeout=1.0)
            return server, url
        except ServedModelUnavailable:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the UM-Bridge server did not start on {url}")


def served_model(url: str, n_modes: int, data) -> pm.Model:
    forward = UMBridgeModel(url, "forward", timeout=60.0)
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, PRIOR_SD, shape=n_modes)
        pm.Normal("y", mu=UMBridgeOp(forward)(theta), sigma=NOISE_SD, observed=data.observations)
    return model


def sample(model: pm.Model, arguments) -> tuple:
    start = time.perf_counter()
    with model:
        idata = pymc_rnshmc.sample(
            draws=arguments.draws,
            tune=arguments.tune,
            chains=arguments.chains,
            random_seed=arguments.seed,
            progressbar=False,
            compute_convergence_checks=False,
            evaluator=ProcessEvaluator(workers=arguments.workers),
        )
    return idata, time.perf_counter() - start


def largest_mean_gap(first, second) -> float:
    """Largest ``|mean1 - mean2|`` over the weights, in their combined standard errors."""
    gaps = []
    for idata in (first, second):
        summary = az.summary(idata, var_names=["theta"], kind="stats", fmt="wide")
        mcse = az.mcse(idata, var_names=["theta"])["theta"].values
        gaps.append((np.asarray(summary["mean"]), np.asarray(mcse)))
    (mean1, mcse1), (mean2, mcse2) = gaps
    return float(np.max(np.abs(mean1 - mean2) / np.hypot(mcse1, mcse2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, metavar="PORT", help="only serve the model")
    parser.add_argument("--host", default="127.0.0.1", help="where --serve listens")
    parser.add_argument("--url", help="sample a server that runs already")
    parser.add_argument("--port", type=int, help="port of the server it starts (default: free)")
    parser.add_argument("--n-cells", type=int, default=30)
    parser.add_argument("--n-modes", type=int, default=20)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    arguments = parser.parse_args()
    if arguments.serve is not None:
        serve(arguments.serve, arguments.host, arguments.n_cells, arguments.n_modes)
        return

    data = synthetic_data(arguments.n_modes, PRIOR_SD, 50, NOISE_SD, SEED)
    server, url = (None, arguments.url) if arguments.url else start_server(arguments)
    try:
        served, served_seconds = sample(served_model(url, arguments.n_modes, data), arguments)
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    local_model = elliptic_pde(arguments.n_modes, PRIOR_SD, arguments.n_cells, seed=SEED)
    local, local_seconds = sample(local_model, arguments)
    print(f"served over UM-Bridge: whole call {served_seconds:.1f} s")
    print(f"solver in process:     whole call {local_seconds:.1f} s")
    print(f"largest gap between the posterior means: {largest_mean_gap(served, local):.2f} MCSE")


if __name__ == "__main__":
    main()
