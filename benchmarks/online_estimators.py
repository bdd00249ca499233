"""Drift and cost of the online least-squares estimators over many updates.

    python -m benchmarks.online_estimators                  # 10 000 updates, ~1 min
    python -m benchmarks.online_estimators --updates 2000

The rows are those ARNSHMC feeds its estimator after tuning: one value row per draw, the
outputs of a random softplus layer (``s`` units plus an intercept) at points of a 50-dimensional
standard normal, with a smooth potential as target. Every estimator starts from the first
``--initial`` rows and then takes the rest one at a time; at checkpoints its weights are compared
with the batch solution of the same problem on all rows so far (scipy: ``lstsq`` for Greville's
minimum-norm solution, a Cholesky solve of the ridge normal equations otherwise). Reported: the
relative difference of the weights and of the predictions on 500 fresh points, and the time per
update (including a solve for ``NormalEquationsRidge``, the cost of a refresh at every row).
Writes ``benchmarks/results/online_estimators.{json,md}``.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import numpy as np
import scipy.linalg

from pymc_rnshmc.surrogates.network.hidden_layers import AdditiveLayer
from pymc_rnshmc.surrogates.network.online_least_squares import (
    GrevilleLeastSquares,
    NormalEquationsRidge,
    RecursiveRidge,
)

RESULTS = Path(__file__).parent / "results"


def problem(n_rows: int, dim: int, n_hidden: int, seed: int):
    rng = np.random.default_rng(seed)
    layer = AdditiveLayer.draw(rng, n_hidden, dim)

    def design(points):
        return np.column_stack([layer.features(points), np.ones(points.shape[0])])

    def target(points):
        return 0.5 * np.sum(points**2, axis=1) + np.log1p(np.exp(points[:, 0] - points[:, 1]))

    points = rng.normal(size=(n_rows, dim))
    test_points = rng.normal(size=(500, dim))
    return design(points), target(points), design(test_points)


def batch_solution(kind: str, rows, targets, penalty):
    if kind == "greville":
        return scipy.linalg.lstsq(rows, targets, lapack_driver="gelsd")[0]
    system = rows.T @ rows + np.diag(penalty)
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(system), rows.T @ targets)


def run(kind: str, rows, targets, test_rows, initial: int, relative_penalty: float, checkpoints):
    width = rows.shape[1]
    start_rows, start_targets = rows[:initial], targets[:initial]
    scale = float(np.mean(np.sum(start_rows**2, axis=0)))
    penalty = np.full(width, relative_penalty * scale)
    penalty[-1] = 0.0  # intercept
    if kind == "normal equations":
        estimator = NormalEquationsRidge(
            penalty, start_rows.T @ start_rows, start_rows.T @ start_targets, initial
        )
    elif kind == "recursive":
        estimator = RecursiveRidge(
            penalty, start_rows.T @ start_rows, start_rows.T @ start_targets, initial
        )
    else:
        estimator = GrevilleLeastSquares(start_rows, start_targets)
    records, seconds = [], 0.0
    for index in range(initial, rows.shape[0]):
        begin = time.perf_counter()
        estimator.add_rows(rows[index : index + 1], targets[index : index + 1])
        weights = estimator.solve()
        seconds += time.perf_counter() - begin
        done = index + 1 - initial
        if done in checkpoints:
            reference = batch_solution(
                "greville" if kind == "greville" else "ridge",
                rows[: index + 1],
                targets[: index + 1],
                penalty,
            )
            weight_error = np.linalg.norm(weights - reference) / np.linalg.norm(reference)
            predicted, expected = test_rows @ weights, test_rows @ reference
            prediction_error = np.sqrt(np.mean((predicted - expected) ** 2)) / np.std(expected)
            records.append(
                {
                    "updates": done,
                    "weight_error": float(weight_error),
                    "prediction_error": float(prediction_error),
                }
            )
            print(
                f"{kind:>17}: {done:6d} updates, weights {weight_error:9.2e}, "
                f"predictions {prediction_error:9.2e}",
                flush=True,
            )
    return {"records": records, "seconds_per_update": seconds / (rows.shape[0] - initial)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=10_000)
    parser.add_argument("--initial", type=int, default=100)
    parser.add_argument("--n-hidden", type=int, default=250)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--penalty", type=float, default=1e-6, help="relative ridge penalty")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows, targets, test_rows = problem(args.initial + args.updates, args.dim, args.n_hidden, 1)
    checkpoints = {
        count for count in (10, 100, 200, 500, 1000, 2000, 5000, 10_000) if count <= args.updates
    } | {args.updates}
    results = {}
    for kind in ("normal equations", "recursive", "greville"):
        results[kind] = run(kind, rows, targets, test_rows, args.initial, args.penalty, checkpoints)
        print(f"{kind}: {results[kind]['seconds_per_update'] * 1e3:.3f} ms per update")
    RESULTS.mkdir(exist_ok=True)
    meta = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "arguments": vars(args),
    }
    (RESULTS / "online_estimators.json").write_text(json.dumps(meta | results, indent=1))
    lines = [
        "| estimator | ms per update | "
        + " | ".join(f"{c} updates" for c in sorted(checkpoints))
        + " |",
        "|---|---|" + "---|" * len(checkpoints),
    ]
    for kind, result in results.items():
        cells = [
            f"{r['weight_error']:.1e} / {r['prediction_error']:.1e}" for r in result["records"]
        ]
        lines.append(
            f"| {kind} | {result['seconds_per_update'] * 1e3:.3f} | " + " | ".join(cells) + " |"
        )
    text = "Relative difference to the batch solution, weights / predictions\n\n" + "\n".join(lines)
    (RESULTS / "online_estimators.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
