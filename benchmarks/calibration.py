"""Simulation-based calibration (Talts et al. 2018) of every sampler on two small models.

    python -m benchmarks.calibration                      # 100 replications, 2 processes
    python -m benchmarks.calibration --replications 20 --samplers RNSHMC \\
        --models nonlinear_regression --output smoke_calibration   # a check of the harness

For each model (``--models``: "hierarchical", a non-centred normal hierarchy with d = 7, and
"nonlinear_regression", ``y = a exp(-b x) + noise`` with d = 3) and each sampler (``--samplers``:
"RNSHMC", "ARNSHMC", "SparseGridHMC", "RNSRMHMC", "NUTS" (PyMC's, the reference), and two
deliberately biased RNSHMCs: "ShiftedRNSHMC", an exact sampler of the posterior moved by 0.75 sd,
and "SurrogateAcceptanceRNSHMC", whose Metropolis test uses the surrogate instead of the model),
every replication draws parameters from the prior, simulates data, samples one chain with
PyMC's default settings (1000 tuning draws, 1000 kept, default options) and ranks the prior draw
among 99 equally spaced posterior draws. The harness, the models and the biased samplers are in
``tests/calibration.py`` (biased samplers live only with the tests).

Replications run in ``--processes`` spawned worker processes (BLAS on one thread each). The
table gives, per model and sampler, the verdict of the chi-square test of uniform ranks (10 bins,
Bonferroni over the parameters, family-wise false-alarm rate ``--alpha``), the smallest p-value
and its parameter, the replications whose kept draws had a bulk ESS below 99 in some parameter,
the median seconds per replication and the mean share of surrogate draws. Results go to
``benchmarks/results/<output>.{json,md}`` (default ``calibration``); rank histograms, one panel
per sampler and parameter with the 99 % band of a bin's count under uniformity, to
``docs/figures/<output>-<model>.png`` (from 10 replications on).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy import stats

from benchmarks.measure import run_metadata, write_results
from tests.calibration import (
    FAMILY_ALPHA,
    MODELS,
    RANKED_DRAWS,
    SAMPLERS,
    CalibrationResult,
    calibration_result,
    run_replications,
)

FIGURES = Path(__file__).parents[1] / "docs" / "figures"
SAMPLER_ORDER = [
    "NUTS",
    "RNSHMC",
    "ARNSHMC",
    "SparseGridHMC",
    "RNSRMHMC",
    "ShiftedRNSHMC",
    "SurrogateAcceptanceRNSHMC",
]
BAND = 0.99


def run(args) -> dict[tuple[str, str], CalibrationResult]:
    """Every replication of every model and sampler in one pool; results per pair."""
    pairs = [(m, s) for m in args.models for s in args.samplers]
    tasks = [(m, s, i, RANKED_DRAWS) for m, s in pairs for i in range(args.replications)]
    start = time.perf_counter()

    def report(i, result) -> None:
        model, sampler, index, _ = tasks[i]
        if index == args.replications - 1 or (i + 1) % 50 == 0:
            print(
                f"{i + 1}/{len(tasks)} done ({time.perf_counter() - start:.0f} s): {model} "
                f"{sampler} #{index} {result.seconds:.1f} s",
                flush=True,
            )

    results = run_replications(tasks, args.processes, report)
    calibrations = {}
    for k, (model, sampler) in enumerate(pairs):
        chunk = results[k * args.replications : (k + 1) * args.replications]
        calibrations[model, sampler] = calibration_result(
            model, sampler, chunk, RANKED_DRAWS, args.alpha
        )
    return calibrations


def entry(result: CalibrationResult) -> dict:
    """Everything about one model and sampler, for the JSON file."""
    replications = result.replications
    return {
        "model": result.model,
        "sampler": result.sampler,
        "labels": result.labels,
        "passed": result.passed,
        "p_values": result.p_values.tolist(),
        "bins": None if result.test is None else result.test.bins,
        "ranks": result.ranks.tolist(),
        "min_ess": [r.min_ess for r in replications],
        "low_ess_replications": result.low_ess,
        "seconds": [r.seconds for r in replications],
        "surrogate_share": [r.surrogate_share for r in replications],
        "warnings": sorted({m for r in replications for m in r.warnings}),
    }


def markdown(calibrations: dict, meta: dict) -> str:
    lines = [
        f"`{meta}`",
        "",
        "| model | sampler | verdict | smallest p-value | low-ESS replications | "
        "median s / replication | surrogate share |",
        "|---" * 7 + "|",
    ]
    for result in calibrations.values():
        p_values = result.p_values
        worst = int(np.nanargmin(p_values)) if np.any(np.isfinite(p_values)) else 0
        verdict = {True: "passed", False: "**failed**", None: "not tested"}[result.passed]
        seconds = np.median([r.seconds for r in result.replications])
        share = np.mean([r.surrogate_share for r in result.replications])
        lines.append(
            f"| {result.model} | {result.sampler} | {verdict} | {p_values[worst]:.3g} "
            f"({result.labels[worst]}) | {result.low_ess} | {seconds:.1f} | "
            f"{'-' if np.isnan(share) else f'{share:.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def plot_ranks(model: str, results: list[CalibrationResult], path: Path) -> None:
    """Rank histograms, one row per sampler and one panel per parameter, with the 99 % band.

    The band is the central 99 % interval of a bin's count under uniform ranks,
    ``Binomial(N, 1 / B)`` (Talts et al.'s figures); the line is its expectation ``N / B``.
    Failed samplers' bars are red.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [bin_counts(result) for result in results]
    n_rows, n_columns = len(results), len(results[0].labels)
    figure, axes = plt.subplots(
        n_rows,
        n_columns,
        figsize=(max(6.0, 1.6 * n_columns + 1.2), 1.3 * n_rows + 1.0),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    top = 0.0
    for row, result in enumerate(results):
        n, bins = counts[row].sum(axis=1)[0], counts[row].shape[1]
        low, high = stats.binom.interval(BAND, n, 1.0 / bins)
        top = max(top, high, counts[row].max())
        color = "C3" if result.passed is False else "C0"
        for column, ax in enumerate(axes[row]):
            ax.axhspan(low, high, color="0.85", zorder=0)
            ax.axhline(n / bins, color="0.5", lw=0.8, zorder=1)
            ax.bar(np.arange(bins), counts[row][column], width=1.0, color=color, ec="w", zorder=2)
            p_value = f"p = {result.p_values[column]:.2g}"
            ax.text(0.5, 0.97, p_value, transform=ax.transAxes, ha="center", va="top", fontsize=7)
            ax.set_xticks([])
        axes[row, 0].set_ylabel(result.sampler, fontsize=8, color=color)
    for column, label in enumerate(results[0].labels):
        axes[0, column].set_title(label, fontsize=9)
        axes[-1, column].set_xlabel("rank", fontsize=8)
    axes[0, 0].set_ylim(0, 1.3 * top)
    figure.suptitle(
        f"SBC rank histograms, {model}: {len(results[0].replications)} replications, "
        f"L = {RANKED_DRAWS}\ngrey: {BAND:.0%} band of a bin's count under uniform ranks",
        fontsize=9,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def bin_counts(result: CalibrationResult) -> np.ndarray:
    """``(P, B)`` ranks per bin, with the test's bins (10 when untested)."""
    bins = 10 if result.test is None else result.test.bins
    binned = result.ranks.T * bins // (result.ranked_draws + 1)
    return np.stack([np.bincount(column, minlength=bins) for column in binned])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=100)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--models", type=lambda text: text.split(","), default=list(MODELS), help="comma-separated"
    )
    parser.add_argument(
        "--samplers",
        type=lambda text: text.split(","),
        default=SAMPLER_ORDER,
        help="comma-separated",
    )
    parser.add_argument("--alpha", type=float, default=FAMILY_ALPHA, help="family-wise, per pair")
    parser.add_argument("--output", default="calibration")
    args = parser.parse_args()
    for name in args.samplers:
        if name not in SAMPLERS:
            parser.error(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")
    start = time.perf_counter()
    calibrations = run(args)
    meta = run_metadata(
        replications=args.replications,
        processes=args.processes,
        ranked_draws=RANKED_DRAWS,
        family_alpha=args.alpha,
        settings={s: {"tune": SAMPLERS[s].tune, "draws": SAMPLERS[s].draws} for s in args.samplers},
        wall_seconds=round(time.perf_counter() - start),
    )
    for result in calibrations.values():
        print(result.summary(), flush=True)
    text = markdown(calibrations, meta)
    entries = [entry(result) for result in calibrations.values()]
    write_results(args.output, {"meta": meta, "calibrations": entries}, text)
    print(text)
    if args.replications >= 10:
        for model in args.models:
            path = FIGURES / f"{args.output}-{model}.png"
            plot_ranks(model, [calibrations[model, s] for s in args.samplers], path)
            print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
