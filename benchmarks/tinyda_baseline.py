"""tinyDA's two-level delayed acceptance on the elliptic PDE, 60 x 60 fine and 30 x 30 coarse.

A baseline for the coarse-model comparison (:mod:`benchmarks.coarse_model`), not a product
feature: tinyDA [1]_ run in its own environment on the posterior of
``pymc_rnshmc.workloads.elliptic_pde.elliptic_pde`` (d = 20, prior N(0, 0.5^2 I), 121
observations with noise sd 0.1, data from a 50 x 50 mesh, seed 2017), its fine model on a
60 x 60 mesh and its coarse model the same posterior on a 30 x 30 mesh (one field, one data
set). It sits next to our minimal MLDA (:mod:`benchmarks.mlda`) and the coarse-model RNSHMC rows
of ``benchmarks/results/coarse_model_pde60.md``.

The environment (tinyDA has no PyMC; ArviZ 0.18 fails on matplotlib 3.11)::

    python3.12 -m venv /tmp/tinyda-env
    /tmp/tinyda-env/bin/pip install tinyDA ray "matplotlib<3.9"

Commands (one process at a time; each appends its row to the result files)::

    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --check-logp   # once, vs PyMC
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --subchain 5     # 40000 iterations
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --subchain 25    # 8000
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --subchain 100   # 4000
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --subchain 25 \\
        --error-model state-independent
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --subchain 100 --seed 2   # seeds 2-4
    /tmp/tinyda-env/bin/python benchmarks/tinyda_baseline.py --rewrite   # the files from the JSON

What runs: ``tinyDA.sample([coarse, fine], proposal, iterations, n_chains=1,
subchain_length=k, force_sequential=True, store_coarse_chain=False)`` on one core (BLAS on one
thread), the coarse proposal tinyDA's ``AdaptiveMetropolis`` (Haario et al. 2001) with global
scale adaptation (``adaptive=True``, towards coarse acceptance 0.24), initial covariance
``2.38^2 / d`` times the prior's, covariance adaptation from coarse step ``--t0``. tinyDA
adapts throughout the run; the first ``--burn`` fine iterations are discarded (the "tuning").
The chain starts at the prior mean (``--start mean``) or at a prior draw (``--start draw``).
``--error-model state-independent`` turns on tinyDA's adaptive error model (Cui et al. 2019),
which corrects the coarse likelihood by the running mean and covariance of fine minus coarse
output.

Measured per run: the whole ``sample`` call; fine and coarse forward solves counted by wrappers
around the two forward models; min bulk and tail ESS over the 20 coordinates (ArviZ); fine
solves to ESS 1000 as in :mod:`benchmarks.coarse_model` (the burn-in's solves as spent plus
the kept iterations' scaled by ``1000 / min(bulk, tail)``; coarse solves and seconds likewise);
the second-stage acceptance (accepted / fine solves) and the fine chain's move rate; the largest
posterior-mean difference, in combined MCSEs, from the reference run (no NUTS draws of this
posterior are stored, so the reference is the tinyDA run with the largest min bulk ESS).
``--check-logp`` compares tinyDA's log posterior with the PyMC model's (through
``--pymc-python``) at three prior draws. Results go to ``benchmarks/results/<output>.{json,md}``.

References
----------
.. [1] Lykkegaard, M. B., Dodwell, T. J., Fox, C., Mingas, G., & Scheichl, R. (2023). Multilevel
   delayed acceptance MCMC. SIAM/ASA Journal on Uncertainty Quantification, 11(1), 1-30.
.. [2] Cui, T., Fox, C., & O'Sullivan, M. J. (2019). A posteriori stochastic correction of
   reduced models in delayed-acceptance MCMC. SIAM/ASA JUQ, 7(3), 1089-1113.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import datetime
import importlib.metadata
import importlib.util
import itertools
import json
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import arviz as az
import numpy as np
import scipy.stats as stats
import tinyDA as tda

ROOT = Path(__file__).resolve().parent.parent
FORWARD_MODEL = ROOT / "pymc_rnshmc" / "workloads" / "elliptic_pde" / "forward_model.py"
RESULTS = ROOT / "benchmarks" / "results"
N_MODES, PRIOR_SD, DATA_CELLS, NOISE_SD, DATA_SEED = 20, 0.5, 50, 0.1, 2017
"""The defaults of ``elliptic_pde``: the posterior reproduced here."""
TARGET_ESS = 1000.0
COLUMNS = (
    "workload",
    "sampler",
    "seed",
    "iterations",
    "burn",
    "whole call s",
    "s to ESS 1000",
    "fine solves to ESS 1000",
    "coarse solves to ESS 1000",
    "fine-solve equivalents to ESS 1000",
    "bulk ESS / draw",
    "tail ESS / draw",
    "min bulk ESS",
    "min tail ESS",
    "accept",
    "move rate",
    "max |dmean| (MCSE)",
)


def load_forward_model() -> ModuleType:
    """``forward_model.py`` by path: importing ``pymc_rnshmc`` would import PyMC."""
    spec = importlib.util.spec_from_file_location("elliptic_forward_model", FORWARD_MODEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Counter:
    """Forward solves of both levels; the coarse solves are the clock that marks the burn-in."""

    boundary: int
    fine: int = 0
    coarse: int = 0
    fine_in_burn: int = 0
    kept_began: float | None = None


class CountedModel:
    """A forward model's ``observe`` that counts its calls in a :class:`Counter`."""

    def __init__(self, forward, counter: Counter, fine: bool) -> None:
        self.forward, self.counter, self.fine = forward, counter, fine

    def __call__(self, theta: np.ndarray) -> np.ndarray:
        counter = self.counter
        if self.fine:
            counter.fine += 1
            counter.fine_in_burn += counter.coarse <= counter.boundary
        else:
            counter.coarse += 1
            if counter.coarse == counter.boundary + 1:
                counter.kept_began = time.perf_counter()
        return self.forward.observe(theta)


def build_problem(fine_cells: int, coarse_cells: int) -> tuple[dict, np.ndarray]:
    """``(forward models by level, observations)``: one field and one data set."""
    module = load_forward_model()
    expansion = module.KarhunenLoeveExpansion(N_MODES)
    data = module.synthetic_data(
        N_MODES, PRIOR_SD, DATA_CELLS, NOISE_SD, DATA_SEED, expansion=expansion
    )
    forwards = {
        "fine": module.EllipticPDEForwardModel(fine_cells, expansion=expansion),
        "coarse": module.EllipticPDEForwardModel(coarse_cells, expansion=expansion),
    }
    return forwards, np.asarray(data.observations)


def prior() -> stats._multivariate.multivariate_normal_frozen:
    return stats.multivariate_normal(np.zeros(N_MODES), PRIOR_SD**2 * np.eye(N_MODES))


def posteriors(forwards: dict, observations: np.ndarray, counter: Counter, error_model: bool):
    """tinyDA's coarse and fine posteriors (the coarse likelihood adaptive for the AEM)."""
    covariance = NOISE_SD**2 * np.eye(observations.size)
    coarse_likelihood = (
        tda.AdaptiveGaussianLogLike(observations, covariance)
        if error_model
        else tda.GaussianLogLike(observations, covariance)
    )
    fine_likelihood = tda.GaussianLogLike(observations, covariance)
    return [
        tda.Posterior(prior(), coarse_likelihood, CountedModel(forwards["coarse"], counter, False)),
        tda.Posterior(prior(), fine_likelihood, CountedModel(forwards["fine"], counter, True)),
    ]


def proposal(t0: int) -> tda.AdaptiveMetropolis:
    """Adaptive Metropolis on the coarse level, its global scale adapted too."""
    initial = 2.38**2 / N_MODES * PRIOR_SD**2 * np.eye(N_MODES)
    return tda.AdaptiveMetropolis(initial, t0=t0, period=100, adaptive=True)


def draws_of(samples: dict, burn: int) -> np.ndarray:
    """The kept fine draws ``(1, draw, 20)`` through ``tda.to_inference_data``."""
    idata = tda.to_inference_data(samples, level="fine", burnin=burn + 1)  # + the start
    posterior = idata.posterior
    return np.stack([posterior[f"x{i}"].values for i in range(N_MODES)], axis=-1)


def ess(draws: np.ndarray, method: str) -> np.ndarray:
    """ArviZ's ESS of every coordinate of ``(chain, draw, coordinate)`` draws."""
    return np.array([float(az.ess(draws[..., i], method=method)) for i in range(draws.shape[2])])


def move_rate(samples: dict, burn: int) -> tuple[int, float]:
    """Accepted fine moves after the burn-in: a rejection repeats the previous link object."""
    chain = samples["chain_fine_0"][burn:]
    moves = sum(new is not old for old, new in itertools.pairwise(chain))
    return moves, moves / (len(chain) - 1)


def run(args: argparse.Namespace) -> dict:
    """One timed ``tda.sample`` call and its row."""
    forwards, observations = build_problem(args.fine_cells, args.coarse_cells)
    counter = Counter(boundary=1 + args.burn * args.subchain)
    error_model = args.error_model == "state-independent"
    levels = posteriors(forwards, observations, counter, error_model)
    # tinyDA's proposals and accept/reject and scipy's prior draws use NumPy's global generator
    np.random.seed(args.seed)  # noqa: NPY002
    start = prior().rvs() if args.start == "draw" else np.zeros(N_MODES)
    began = time.perf_counter()
    samples = tda.sample(
        levels,
        proposal(args.t0),
        args.iterations,
        n_chains=1,
        initial_parameters=start,
        subchain_length=args.subchain,
        adaptive_error_model=args.error_model if error_model else None,
        store_coarse_chain=False,
        force_sequential=True,
    )
    seconds = time.perf_counter() - began
    return measure(samples, counter, seconds, began, args)


def measure(samples: dict, counter: Counter, seconds: float, began: float, args) -> dict:
    """A run's row: costs to ESS 1000, ESS, acceptance, per-coordinate moments."""
    draws = draws_of(samples, args.burn)
    bulk, tail = ess(draws, "bulk"), ess(draws, "tail")
    scale = TARGET_ESS / min(bulk.min(), tail.min())
    kept = draws.shape[1]
    fine_kept = counter.fine - counter.fine_in_burn
    coarse_burn = counter.boundary
    coarse_kept = counter.coarse - coarse_burn
    burn_seconds = counter.kept_began - began
    moves, rate = move_rate(samples, args.burn)
    label = f"tinyDA DA {args.subchain}" + (" + AEM" if args.error_model != "none" else "")
    sd = draws.std(axis=(0, 1), ddof=1)
    return {
        "workload": f"pde_{args.fine_cells}/{args.coarse_cells}",
        "sampler": label,
        "seed": args.seed,
        "subchain": args.subchain,
        "error model": args.error_model,
        "start": args.start,
        "t0": args.t0,
        "iterations": args.iterations,
        "burn": args.burn,
        "whole call s": seconds,
        "burn-in s": burn_seconds,
        "s to ESS 1000": burn_seconds + (seconds - burn_seconds) * scale,
        "fine solves": counter.fine,
        "coarse solves": counter.coarse,
        "fine solves in burn-in": counter.fine_in_burn,
        "coarse solves in burn-in": coarse_burn,
        "fine solves to ESS 1000": counter.fine_in_burn + fine_kept * scale,
        "coarse solves to ESS 1000": coarse_burn + coarse_kept * scale,
        "bulk ESS / draw": bulk.min() / kept,
        "tail ESS / draw": tail.min() / kept,
        "min bulk ESS": bulk.min(),
        "min tail ESS": tail.min(),
        "accept": moves / fine_kept if fine_kept else float("nan"),
        "move rate": rate,
        "mean": draws.mean(axis=(0, 1)).tolist(),
        "sd": sd.tolist(),
        "mcse": (sd / np.sqrt(bulk)).tolist(),
    }


def solve_seconds(forward, repeats: int = 50) -> float:
    """Median seconds of one forward solve at distinct prior draws (no cached factor)."""
    rng = np.random.default_rng(0)
    thetas = PRIOR_SD * rng.standard_normal((repeats + 1, N_MODES))
    forward.observe(thetas[0])
    times = []
    for theta in thetas[1:]:
        began = time.perf_counter()
        forward.observe(theta)
        times.append(time.perf_counter() - began)
    return float(np.median(times))


PYMC_LOGP = """
import json, sys
import numpy as np
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde
thetas = np.array(json.loads(sys.argv[1]))
out = {}
for cells in json.loads(sys.argv[2]):
    logp = elliptic_pde(n_cells=cells).compile_logp()
    out[cells] = [float(logp({"theta": theta})) for theta in thetas]
print(json.dumps(out))
"""
"""Run by ``--pymc-python``: the PyMC model's logp at the given thetas, per mesh."""


def check_logp(args: argparse.Namespace) -> dict:
    """tinyDA's log posterior against the PyMC model's at three prior draws, both meshes."""
    forwards, observations = build_problem(args.fine_cells, args.coarse_cells)
    levels = posteriors(forwards, observations, Counter(boundary=0), error_model=False)
    thetas = PRIOR_SD * np.random.default_rng(3).standard_normal((3, N_MODES))
    cells = [args.coarse_cells, args.fine_cells]
    command = [args.pymc_python, "-c", PYMC_LOGP, json.dumps(thetas.tolist()), json.dumps(cells)]
    pymc = json.loads(subprocess.run(command, cwd=ROOT, capture_output=True, check=True).stdout)
    check = {}
    for level, cell_count in zip(levels, cells):
        mine = np.array([level.logpdf(theta) for theta in thetas])
        theirs = np.array(pymc[str(cell_count)])
        offset = theirs - mine
        check[f"{cell_count} x {cell_count}"] = {
            "tinyDA": mine.tolist(),
            "PyMC": theirs.tolist(),
            "constant": float(offset[0]),
            "max |difference of differences|": float(np.max(np.abs(offset - offset[0]))),
        }
    return check


def metadata() -> dict:
    return {
        "date": datetime.date.today().isoformat(),
        "tinyDA": importlib.metadata.version("tinyDA"),
        "numpy": np.__version__,
        "scipy": importlib.metadata.version("scipy"),
        "arviz": az.__version__,
        "python": platform.python_version(),
        "machine": " ".join(platform.uname()),
        "threads": os.environ["OMP_NUM_THREADS"],
    }


def load_results(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {"meta": {}, "rows": []}


def add_row(rows: list[dict], row: dict) -> list[dict]:
    """``rows`` with ``row`` in place of a run of the same settings, else appended."""
    key = ("sampler", "seed", "iterations", "burn", "start", "t0", "workload")
    kept = [r for r in rows if any(r.get(k) != row.get(k) for k in key)]
    return [*kept, row]


def compare_means(rows: list[dict]) -> str | None:
    """Each row's largest mean difference, in combined MCSEs, from the most precise run's."""
    if not rows:
        return None
    reference = max(rows, key=lambda r: r["min bulk ESS"])
    for row in rows:
        difference = np.abs(np.subtract(row["mean"], reference["mean"]))
        combined = np.hypot(row["mcse"], reference["mcse"])
        row["max |dmean| (MCSE)"] = (
            0.0 if row is reference else float(np.max(difference / combined))
        )
    return f"{reference['sampler']}, seed {reference['seed']}, {reference['iterations']} iterations"


def cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "-" if value is None else str(value)


def markdown(results: dict) -> str:
    """The result file: header lines, the check, the table."""
    meta = results["meta"]
    lines = [f"# tinyDA delayed acceptance baseline ({meta['date']}, tinyDA {meta['tinyDA']})", ""]
    lines += [f"{meta['workload']}", "", f"Machine: {meta['machine']}", ""]
    if "logp check" in meta:
        for mesh, check in meta["logp check"].items():
            lines.append(
                f"logp check {mesh}: PyMC - tinyDA = {check['constant']:.6g} at three prior draws,"
                f" spread {check['max |difference of differences|']:.2g}"
            )
        lines.append("")
    lines += [
        f"Fine-solve equivalents: fine solves + {meta['coarse / fine solve, median over runs']:.3g}"
        " x coarse solves (the median coarse/fine cost ratio of the runs).",
        f"max |dmean| reference (no NUTS draws stored): {meta.get('reference')}",
        "",
    ]
    lines.append("| " + " | ".join(c.replace("|", "\\|") for c in COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    lines += [
        "| " + " | ".join(cell(row.get(c)) for c in COLUMNS) + " |" for row in results["rows"]
    ]
    return "\n".join(lines) + "\n"


def write(name: str, results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1, default=float))
    (RESULTS / f"{name}.md").write_text(markdown(results))


def costs(args: argparse.Namespace) -> tuple[str, float]:
    """The workload line with the cost of one solve per level, and the coarse/fine ratio."""
    forwards, _ = build_problem(args.fine_cells, args.coarse_cells)
    fine, coarse = solve_seconds(forwards["fine"]), solve_seconds(forwards["coarse"])
    line = (
        f"pde_{args.fine_cells}/{args.coarse_cells}: elliptic PDE, d = 20, {args.fine_cells} x "
        f"{args.fine_cells} mesh, coarse {args.coarse_cells} x {args.coarse_cells}; one forward "
        f"solve (tinyDA env, numpy/scipy) {1e3 * fine:.3g} ms fine, {1e3 * coarse:.3g} ms coarse"
        f" ({fine / coarse:.3g} x cheaper)"
    )
    return line, coarse / fine


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subchain", type=int, default=25, help="coarse steps per fine step")
    parser.add_argument(
        "--iterations", type=int, help="fine iterations with the burn-in (max(4000, 200000 // k))"
    )
    parser.add_argument("--burn", type=int, default=1000, help="fine iterations discarded")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--error-model", choices=("none", "state-independent"), default="none")
    parser.add_argument("--start", choices=("mean", "draw"), default="mean")
    parser.add_argument("--t0", type=int, default=1000, help="coarse steps before AM's covariance")
    parser.add_argument("--fine-cells", type=int, default=60)
    parser.add_argument("--coarse-cells", type=int, default=30)
    parser.add_argument("--output", default="tinyda_pde60")
    parser.add_argument("--check-logp", action="store_true", help="only compare with PyMC's logp")
    parser.add_argument("--rewrite", action="store_true", help="only rewrite the result files")
    parser.add_argument("--pymc-python", default=str(ROOT / ".venv-test-3.12" / "bin" / "python"))
    args = parser.parse_args()
    if args.iterations is None:  # about 6 minutes on one core for k = 5, 25 and 100
        args.iterations = max(4000, 200_000 // args.subchain)
    return args


def finish(results: dict) -> None:
    """Fine-solve equivalents at the median coarse/fine cost ratio of the runs; mean errors."""
    rows = results["rows"]
    ratio = float(np.median([row["coarse / fine solve"] for row in rows])) if rows else np.nan
    for row in rows:
        coarse = ratio * row["coarse solves to ESS 1000"]
        row["fine-solve equivalents to ESS 1000"] = row["fine solves to ESS 1000"] + coarse
    results["meta"]["coarse / fine solve, median over runs"] = ratio
    results["meta"]["reference"] = compare_means(rows)


def main() -> None:
    args = parse()
    results = load_results(args.output)
    if not args.rewrite:
        results["meta"] |= metadata()
        results["meta"]["workload"], ratio = costs(args)
    if args.check_logp:
        results["meta"]["logp check"] = check_logp(args)
        print(json.dumps(results["meta"]["logp check"], indent=1))
    elif not args.rewrite:
        row = run(args)
        row["command"] = " ".join([Path(sys.executable).as_posix(), *sys.argv])
        row["coarse / fine solve"] = ratio
        results["rows"] = add_row(results["rows"], row)
    finish(results)
    if not args.check_logp and not args.rewrite:
        print(" | ".join(f"{c}: {cell(row.get(c))}" for c in COLUMNS), flush=True)
    write(args.output, results)


if __name__ == "__main__":
    main()
