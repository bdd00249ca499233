"""Stationarity of every sampler's tuned, frozen kernel, at a larger size than the tests.

    python -m benchmarks.stationarity                  # N = 20 000, seeds 1-3: over an hour
    python -m benchmarks.stationarity --n 4000 --seeds 1 2 --extra-n 2000 --riemannian-n 300 \
        --max-steps 128                                # about 15 minutes

Each run tunes one chain of a sampler with ``pm.sample`` (``--tune`` draws, the sampler's own
exploration length), takes ``N`` independent exact draws of a posterior with known exact draws
(``tests/stationarity.py``: the banana of the sparse-grid paper, by 1-d quadrature and inverse
CDF; a correlated Student-t with 4 degrees of freedom, by scipy), pushes each through ``k`` = 1
and 5 transitions of the frozen step (``tune`` off), and compares the pushed draws with the
posterior: means and a scale in iid standard errors, the 1, 5, 50, 95 and 99 % quantiles by
binomial counts, and a two-sample KS test against ``N`` fresh exact draws (Bonferroni over the
two coordinates). A kernel passes with ``max |z| < 4.5`` and ``KS p > 1e-3`` (false-alarm rate
about 1.1e-3 per row for an exact kernel).

Kernels: every sampler and dynamics of the protocol tests (``tests/step_methods/conftest.py``:
RNSHMC with leapfrog and NUTS dynamics, on a model without gradients and with a deliberately
wrong coarse model, ARNSHMC, RNSRMHMC, SparseGridHMC), on every seed; and, on the first seed
only with ``--extra-n`` draws, ARNSHMC with ``freeze_after_tuning=True`` (alone and with a wrong
coarse model), RNSHMC with deliberately wrong surrogates (which must still pass),
and three broken kernels that must fail: ``ShiftedRNSHMC`` (an exact sampler of the posterior
moved by 0.25 sd) and ``SurrogateAcceptanceRNSHMC`` (Metropolis test on the surrogate, not the
model) with its own surrogate and with one flattened to 0.3 times its potential. RNSRMHMC costs
25-50 ms a transition (the others under 1 ms), so it runs with ``--riemannian-n`` draws, on
the first seed only.

``--only TEXT`` runs only the kernels whose label contains the text.

``--max-steps`` caps every trajectory (a cap keeps an exact kernel exact): without it a run whose
step size tuned very small pays 1024 surrogate steps a transition (RNSHMC without gradients on the
banana, seed 1: step size 0.0024, 33 ms a transition, 11 minutes for N = 4000).

Results: ``benchmarks/results/<output>.json`` (every z-score) and ``<output>.md`` (the table).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC
from tests.calibration import ShiftedRNSHMC, SurrogateAcceptanceRNSHMC
from tests.stationarity import KS_LIMIT, POSTERIORS, Z_LIMIT, StationarityRun, run_stationarity
from tests.step_methods.conftest import SAMPLERS
from tests.step_methods.helpers import DistortedSurrogate, WrongCoarseModel

K_VALUES = (1, 5)


@dataclass(frozen=True)
class Kernel:
    """A step to tune and push: its label, how to build it, and whether it should pass."""

    label: str
    make: Callable[[], Any]
    exact: bool = True
    gradient: bool = True
    extra: bool = False
    """Run on the first seed only, with ``--extra-n`` draws."""
    riemannian: bool = False
    """Run with ``--riemannian-n`` draws."""


def protocol_kernels() -> list[Kernel]:
    """The protocol tests' samplers, each with its own default exploration length."""
    return [
        Kernel(
            case.step_class.__name__
            + (" (black box)" if case.black_box else "")
            + (" (wrong coarse model)" if "coarse" in case.options else ""),
            functools.partial(case.make, exploration_steps=None, safety_net=None),
            gradient=not case.black_box,
            riemannian=case.step_class is RNSRMHMC,
        )
        for case in SAMPLERS
    ]


def wrong_surrogate(step_class, kind: str, amount: float, **options) -> Callable[[], Any]:
    """``step_class`` with a fixed :class:`DistortedSurrogate` (no refits, no collapse watch).

    Trajectories capped at 64 leapfrog steps and trees at depth 6, as in the tests: a cap keeps
    an exact kernel exact, and accepting on the flattened surrogate otherwise drives the step
    size to its lower bound (hundreds of steps a trajectory).
    """
    options = {"max_steps": 64, "max_treedepth": 6, "refit_during_tuning": False, **options}

    def make(**overrides):
        return step_class(surrogate=DistortedSurrogate(kind, amount), **{**overrides, **options})

    return make


def extra_kernels() -> list[Kernel]:
    """ARNSHMC frozen (alone and with a wrong coarse model), RNSHMC with wrong surrogates
    (exact), and the broken kernels."""
    return [
        Kernel(
            "ARNSHMC (frozen after tuning)", functools.partial(ARNSHMC, freeze_after_tuning=True)
        ),
        Kernel(
            "ARNSHMC (frozen, wrong coarse model)",
            functools.partial(ARNSHMC, freeze_after_tuning=True, coarse=WrongCoarseModel()),
        ),
        Kernel("RNSHMC, wall surrogate", wrong_surrogate(RNSHMC, "wall", 1.0)),
        Kernel("RNSHMC, flattened surrogate", wrong_surrogate(RNSHMC, "flattened", 0.3)),
        Kernel(
            "RNSHMC, flattened surrogate",
            wrong_surrogate(RNSHMC, "flattened", 0.3, dynamics="nuts"),
        ),
        Kernel("ShiftedRNSHMC (0.25 sd)", functools.partial(ShiftedRNSHMC, shift=0.25), False),
        Kernel("SurrogateAcceptanceRNSHMC", SurrogateAcceptanceRNSHMC, False),
        Kernel(
            "SurrogateAcceptanceRNSHMC, flattened surrogate",
            wrong_surrogate(SurrogateAcceptanceRNSHMC, "flattened", 0.3),
            False,
        ),
    ]


def verdict(kernel: Kernel, passed: bool) -> str:
    if kernel.exact:
        return "passed" if passed else "**FAILED**"
    return "caught (broken, as expected)" if not passed else "**missed** (broken kernel passed)"


def rows_of(kernel: Kernel, posterior: str, seed: int, run: StationarityRun) -> list[dict]:
    """One row per ``k`` for the JSON file and the table."""
    rows = []
    for k, result in run.results.items():
        rows.append(
            {
                "sampler": kernel.label,
                "dynamics": run.dynamics,
                "posterior": posterior,
                "seed": seed,
                "k": k,
                "n": result.n,
                "exact_kernel": kernel.exact,
                "max_abs_z": result.max_abs_z,
                "worst": result.worst,
                "ks_pvalue": result.ks_pvalue,
                "moved": result.moved,
                "starts_max_abs_z": run.baseline.max_abs_z,
                "starts_worst": run.baseline.worst,
                "passed": result.passed,
                "verdict": verdict(kernel, result.passed),
                "phase": run.phase,
                "accept": run.share("accept"),
                "mean_steps": run.share("n_steps"),
                "surrogate_share": run.share("used_surrogate"),
                "safety_net_share": run.share("safety_net"),
                "fresh_start_evaluations": run.fresh_start_evaluations,
                "tune_seconds": run.tune_seconds,
                "push_seconds": run.pushed.seconds,
                "warnings": sorted(set(run.warnings) | set(run.pushed.warnings)),
                "z": result.z,
            }
        )
    return rows


def tasks(args) -> list[tuple[Kernel, str, int, int]]:
    """``(kernel, posterior, seed, n)`` of every run, in order."""
    planned = []
    for seed in args.seeds:
        for posterior in args.posteriors:
            for kernel in protocol_kernels():
                if args.only and args.only not in kernel.label:
                    continue
                n = args.riemannian_n if kernel.riemannian else args.n
                if kernel.riemannian and seed != args.seeds[0]:
                    continue
                planned.append((kernel, posterior, seed, n))
    if not args.no_extra:
        for posterior in args.posteriors:
            planned += [
                (kernel, posterior, args.seeds[0], args.extra_n)
                for kernel in extra_kernels()
                if args.only in kernel.label
            ]
    return planned


def run(args) -> list[dict]:
    rows = []
    planned = tasks(args)
    start = time.perf_counter()
    for i, (kernel, posterior, seed, n) in enumerate(planned):
        make = kernel.make
        if args.max_steps is not None:
            make = functools.partial(make, max_steps=args.max_steps)
        result = run_stationarity(
            make,
            POSTERIORS[posterior](),
            n=n,
            tune=args.tune,
            seed=seed,
            k_values=K_VALUES,
            gradient=kernel.gradient,
        )
        rows += rows_of(kernel, posterior, seed, result)
        summaries = "; ".join(r.summary() for r in result.results.values())
        print(
            f"{i + 1}/{len(planned)} ({time.perf_counter() - start:.0f} s) {kernel.label} "
            f"[{result.dynamics}] {posterior} seed {seed}: {summaries}",
            flush=True,
        )
    return rows


def dynamics(row: dict) -> str:
    """The dynamics, and the phase if tuning ended without the surrogate (exact sampling)."""
    if row["phase"] == "surrogate":
        return row["dynamics"]
    return f"{row['dynamics']} (**{row['phase']} phase**)"


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"`{meta}`",
        "",
        f"Pass: max |z| < {Z_LIMIT} and KS p > {KS_LIMIT:g}. moved: share of pushed draws that "
        "left their start; steps: mean leapfrog steps (or tree steps) per transition; starts' "
        "max abs z: the exact starting draws themselves compared (k = 0), whose fluctuation a "
        "transition that moves little carries into the pushed draws at small k.",
        "",
        "| sampler | dynamics | posterior | seed | k | N | max abs z (check) | KS p | moved "
        "| steps | starts' max abs z | verdict |",
        "|---" * 12 + "|",
    ]
    for row in rows:
        lines.append(
            f"| {row['sampler']} | {dynamics(row)} | {row['posterior']} | {row['seed']} | "
            f"{row['k']} | {row['n']} | {row['max_abs_z']:.2f} ({row['worst']}) | "
            f"{row['ks_pvalue']:.3g} | {row['moved']:.2f} | {row['mean_steps']:.0f} | "
            f"{row['starts_max_abs_z']:.2f} ({row['starts_worst']}) | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="exact draws pushed per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--riemannian-n", type=int, default=2000, help="N for RNSRMHMC")
    parser.add_argument("--extra-n", type=int, default=20_000, help="N of the extra kernels")
    parser.add_argument("--no-extra", action="store_true", help="only the protocol samplers")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="cap on leapfrog steps per trajectory (default: each sampler's own, 1024)",
    )
    parser.add_argument("--posteriors", nargs="+", default=list(POSTERIORS), choices=POSTERIORS)
    parser.add_argument("--only", default="", help="only the kernels whose label has this")
    parser.add_argument("--output", default="stationarity")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = run(args)
    meta = run_metadata(
        n=args.n,
        seeds=args.seeds,
        tune=args.tune,
        k_values=list(K_VALUES),
        riemannian_n=args.riemannian_n,
        extra_n=None if args.no_extra else args.extra_n,
        max_steps=args.max_steps,
        z_limit=Z_LIMIT,
        ks_limit=KS_LIMIT,
        wall_seconds=round(time.perf_counter() - start),
    )
    table = markdown(rows, meta)
    write_results(args.output, {"meta": meta, "rows": rows}, table)
    print(table)


if __name__ == "__main__":
    main()
