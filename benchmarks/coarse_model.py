"""The user's coarse model as the surrogate, against the network alone, MLDA and NUTS.

    python -m benchmarks.coarse_model                                  # every workload, seed 1
    python -m benchmarks.coarse_model --workloads pde_60/30 --seeds 1,2 --output coarse_pde60
    python -m benchmarks.coarse_model --workloads ode/2 --tune 200 --draws 200 \\
        --samplers "NUTS,RNSHMC coarse" --output smoke_coarse_model      # smoke

Workloads (``--workloads``, ``fine/coarse``):

- ``pde_N/M``: the RNS-HMC paper's elliptic PDE (d = 20) on an ``N x N`` mesh, its coarse model
  the same posterior solved on an ``M x M`` mesh
  (:func:`pymc_rnshmc.workloads.elliptic_pde.elliptic_pde`, same data, same field);
- ``ode/m``: Lotka-Volterra through ``pm.ode`` (d = 7, scipy's ``odeint`` with forward
  sensitivities), its coarse model fixed-step Runge-Kutta with ``m`` steps per unit of time in
  PyTensor (:func:`pymc_rnshmc.workloads.ode.lotka_volterra`);
- ``ode_rtol/r``: the same, its coarse model ``pm.ode`` with relative tolerance ``r``
  (``1e-3``: a loose-tolerance solve).

Samplers (``--samplers``): ``NUTS`` (PyMC's, diagonal mass matrix), ``NUTS dense``
(``init="jitter+adapt_full"``), ``nutpie``, ``nutpie low-rank``, ``RNSHMC`` (the random network
alone), ``RNSHMC coarse`` (``coarse=`` the coarse model), ``RNSHMC coarse 20 %`` (the same
with its first fit after 20 % of tuning, as RNSHMC without ``coarse=``), ``RNSHMC coarse
alone`` (trajectories by the coarse model alone, for its acceptance) and ``MLDA`` (two
levels, the coarse random walk subsampled 5 times, or ``k`` times for ``MLDA k``;
:mod:`benchmarks.mlda`). One chain of
``--tune`` + ``--draws`` per workload, seed and sampler, one core, BLAS on one thread, each a
whole timed ``pm.sample`` call with its tuning kept, split into parts as in
:mod:`benchmarks.wide_models`.

Per row: the whole call; exact logp and gradient evaluations (and seconds) until min bulk and
tail ESS reach 1000 (tuning as spent, the kept draws scaled); bulk and tail ESS per draw;
acceptance; for the surrogates the held-out error of the coarse model alone, of coarse +
correction and of the network alone at the last fit, and what the trajectories moved by; the
largest difference of a posterior mean from the first NUTS run's (``NUTS``, else ``NUTS
dense``, ...) in combined MCSEs; and the seconds of one fine and one coarse logp-and-gradient
call. Results go to
``benchmarks/results/<output>.{json,md}`` after every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import time

import numpy as np

from benchmarks.measure import cell, markdown_table, run_metadata, write_results
from benchmarks.mlda import TwoLevelDelayedAcceptance
from benchmarks.wide_models import breakdown, timed_call
from pymc_rnshmc import RNSHMC
from pymc_rnshmc.comparison import comparison_table
from pymc_rnshmc.step_methods.exact_model import ExactModel
from pymc_rnshmc.surrogates.base import held_out_error
from pymc_rnshmc.workloads.elliptic_pde import elliptic_pde
from pymc_rnshmc.workloads.ode import lotka_volterra

SAMPLERS = (
    "NUTS",
    "NUTS dense",
    "nutpie",
    "nutpie low-rank",
    "RNSHMC",
    "RNSHMC coarse",
    "RNSHMC coarse 20 %",
    "MLDA",
)
BACKENDS = {"NUTS": "pymc", "NUTS dense": "pymc", "nutpie": "nutpie", "nutpie low-rank": "nutpie"}
OPTIONS = {
    "NUTS dense": {"init": "jitter+adapt_full"},
    "nutpie low-rank": {"adaptation": "low_rank"},
}


def workload(name: str):
    """``(description, fine model, coarse model)`` of ``pde_N/M``, ``ode/m`` or ``ode_rtol/r``."""
    kind, coarse = name.split("/")
    if kind.startswith("pde_"):
        fine_cells, coarse_cells = int(kind[4:]), int(coarse)
        return (
            f"elliptic PDE, d = 20, {fine_cells} x {fine_cells} mesh, coarse {coarse_cells} x "
            f"{coarse_cells}",
            elliptic_pde(n_cells=fine_cells),
            elliptic_pde(n_cells=coarse_cells),
        )
    if kind == "ode":
        steps = int(coarse)
        return (
            f"Lotka-Volterra through pm.ode, d = 7, coarse RK4 with {steps} steps per unit time",
            lotka_volterra(),
            lotka_volterra(steps_per_unit=steps),
        )
    if kind == "ode_rtol":
        return (
            f"Lotka-Volterra through pm.ode, d = 7, coarse pm.ode with rtol {coarse}",
            lotka_volterra(),
            lotka_volterra(rtol=float(coarse)),
        )
    raise ValueError(f"unknown workload {name!r}")


def seconds_per_call(model, repeats: int = 50) -> float:
    """Median seconds of one logp-and-gradient call at points near the initial point."""
    exact = ExactModel(model, model.continuous_value_vars, dtype="float64")
    start = exact.cast(exact._start)
    rng = np.random.default_rng(0)
    points = start + 0.05 * rng.standard_normal((repeats, start.size))
    exact.potential_and_gradient(start)
    times = []
    for point in points:
        began = time.perf_counter()
        exact.potential_and_gradient(point)
        times.append(time.perf_counter() - began)
    return float(np.median(times))


def coarse_alone(coarse) -> RNSHMC:
    """RNSHMC whose trajectories move by the coarse model alone (the correction still fitted)."""
    step = RNSHMC(coarse=coarse)
    step._surrogate_template.moves_by = "coarse"  # a study, not a user's option
    return step


def step_of(sampler: str, coarse, args):
    """What ``run_sampler`` takes for ``sampler``."""
    if sampler in BACKENDS:
        return BACKENDS[sampler]
    if sampler == "RNSHMC coarse":
        return functools.partial(RNSHMC, coarse=coarse)
    if sampler == "RNSHMC coarse alone":  # moves by the coarse model alone, for its acceptance
        return functools.partial(coarse_alone, coarse=coarse)
    if sampler == "RNSHMC coarse 20 %":  # the first fit after 20 % of tuning, as without coarse=
        return functools.partial(RNSHMC, coarse=coarse, exploration_steps=args.tune // 5)
    if sampler.startswith("MLDA"):  # "MLDA" subsamples 5 coarse steps, "MLDA 25" 25
        subsampling = int(sampler[4:] or 5)
        return functools.partial(TwoLevelDelayedAcceptance, coarse=coarse, subsampling=subsampling)
    return RNSHMC


def sample(fine, coarse, sampler: str, args, seed: int):
    """One timed call, tuning kept, and the fits' times."""
    step = step_of(sampler, coarse, args)
    return timed_call(fine, step, sampler, args, seed, **OPTIONS.get(sampler, {}))


def surrogate_columns(step) -> dict:
    """The last fit's held-out errors and what the trajectories moved by."""
    surrogate = getattr(step, "surrogate", None)
    if surrogate is None:
        return {}
    report = surrogate.report
    errors = getattr(report, "errors", None)
    if errors is None:
        return {"network alone error": float(held_out_error(surrogate)), "moved by": "network"}
    return {
        "coarse alone error": float(errors.coarse),
        "coarse + correction error": float(errors.corrected),
        "network alone error": float(errors.network),
        "moved by": report.choice,
    }


def measure(run, fits, runs: dict, args) -> dict:
    """One run's row."""
    reference = next((name for name in BACKENDS if name in runs), None)
    table = comparison_table(runs, reference).loc[run.name]
    kept = run.trace.sample_stats
    row = {
        "whole call s": run.whole_call_seconds,
        "bulk ESS / draw": table["min bulk ESS"] / args.draws,
        "tail ESS / draw": table["min tail ESS"] / args.draws,
        "logps to ESS 1000": table["logps to ESS 1000"],
        "gradients to ESS 1000": table["gradients to ESS 1000"],
        "s to ESS 1000": table["s to ESS 1000"],
        "accept": table["accept"],
        "max |dmean| (MCSE)": table["max |dmean| (MCSE)"],
        "parts": breakdown(run, fits) if run.backend != "nutpie" else {},
    }
    if "n_coarse_evals" in kept:
        row["coarse logps / draw"] = float(kept["n_coarse_evals"].values.mean())
    if "used_surrogate" in kept:
        used = kept["used_surrogate"].values.ravel().astype(bool)
        steps = kept["n_steps"].values.ravel()[used]
        row["steps / surrogate draw"] = float(steps.mean()) if used.any() else None
    return row | surrogate_columns(run.step)


COLUMNS = (
    "workload",
    "sampler",
    "seed",
    "whole call s",
    "s to ESS 1000",
    "logps to ESS 1000",
    "gradients to ESS 1000",
    "bulk ESS / draw",
    "tail ESS / draw",
    "accept",
    "coarse alone error",
    "coarse + correction error",
    "network alone error",
    "moved by",
    "max |dmean| (MCSE)",
)


def markdown(rows: list[dict], meta: dict) -> str:
    """The result file's table, with each workload's cost per call."""
    lines = [f"# Coarse model as the surrogate ({meta['date']}, PyMC {meta['pymc']})", ""]
    lines += [f"{name}: {text}" for name, text in meta["workloads"].items()] + [""]
    filled = [{column: row.get(column) for column in COLUMNS} for row in rows]
    lines += markdown_table(filled, COLUMNS)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="pde_60/30,pde_60/15,pde_120/30,ode/2")
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--output", default="coarse_model")
    args = parser.parse_args()
    samplers = args.samplers.split(",")
    meta = run_metadata(tune=args.tune, draws=args.draws, samplers=samplers, workloads={})
    rows = []
    for name in args.workloads.split(","):
        description, fine, coarse = workload(name)
        fine_s, coarse_s = seconds_per_call(fine), seconds_per_call(coarse)
        meta["workloads"][name] = (
            f"{description}; one logp+gradient {1e3 * fine_s:.3g} ms, coarse {1e3 * coarse_s:.3g}"
            f" ms ({fine_s / coarse_s:.3g} x cheaper)"
        )
        for seed in (int(s) for s in args.seeds.split(",")):
            runs = {}
            for sampler in samplers:
                run, fits = sample(fine, coarse, sampler, args, seed)
                runs[sampler] = run
                row = {"workload": name, "sampler": sampler, "seed": seed}
                rows.append(row | measure(run, fits, runs, args))
                print(" | ".join(f"{c}: {cell(rows[-1].get(c))}" for c in COLUMNS), flush=True)
                write_results(args.output, {"meta": meta, "rows": rows}, markdown(rows, meta))


if __name__ == "__main__":
    main()
