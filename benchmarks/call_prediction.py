"""Does a run on a cheap model predict the call on a costly one? ``predict_call`` against the clock.

    python -m benchmarks.call_prediction                          # d = 5, 4 seeds, ~11 min
    python -m benchmarks.call_prediction --dim 20 --costs 0,0.001 --seeds 1,2 \\
        --output call_prediction_d20                               # ~6 min
    python -m benchmarks.call_prediction --seeds 1 --costs 0,0.001 --output smoke_call_prediction
    python -m benchmarks.call_prediction --tables --output call_prediction   # tables of a result

The workload is the sleeping Gaussian (:func:`~pymc_rnshmc.workloads.sleeping_normal`): the same
posterior at every cost, each logp (with its gradient or not) sleeping ``s`` seconds more, as a
solve would. Every sampler and seed runs at every cost, one chain of ``--tune`` + ``--draws``, each
run in its own process (it pays its own compilation, as a user's call does). Each run but the
costliest also predicts the calls at the costlier settings
(:func:`~pymc_rnshmc.comparison.predict_call`: its own counted evaluations, priced at the cost
:meth:`~pymc_rnshmc.comparison.EvaluationCost.of_model` measured on its model, slower by the
difference of the sleeps), and the tables set each prediction beside the measured call: the whole
call and the seconds to a min(bulk, tail) ESS of 1000. A second column prices the same counts at
the cost measured on the costlier model itself: a sleep takes a little longer than asked, so the
difference between the two columns is the error of the assumed cost, not of the counts. NUTS
spends the same evaluations at every cost; RNSHMC weighs measured seconds while tuning, so a
costlier model may choose otherwise, and the ``same counts`` column says whether the evaluations
matched.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

from benchmarks.measure import RESULTS, markdown_table, run_metadata, write_results

ROOT = Path(__file__).resolve().parents[1]
SAMPLERS = ("NUTS", "NUTS dense", "RNSHMC")
"""PyMC's NUTS (diagonal adaptation), with ``init="jitter+adapt_full"``, and RNSHMC's defaults."""


def one_run(dim: int, cost: float, sampler: str, seed: int, args: dict) -> dict:
    """One timed call in this process, with its predictions at ``args["costs"]`` above ``cost``."""
    from pymc_rnshmc import RNSHMC, EvaluationCost, predict_call
    from pymc_rnshmc.comparison import comparison_table, run_sampler
    from pymc_rnshmc.workloads import sleeping_normal

    model = sleeping_normal(dim, cost)
    options = {"init": "jitter+adapt_full"} if sampler == "NUTS dense" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_sampler(
            "pymc" if sampler.startswith("NUTS") else RNSHMC,
            model,
            name=sampler,
            tune=args["tune"],
            draws=args["draws"],
            chains=1,
            random_seed=seed,
            progressbar=False,
            **options,
        )
    row = comparison_table({sampler: run}).iloc[0]
    measured = EvaluationCost.of_model(model, repeats=args["repeats"])
    predictions = {}
    for target in args["costs"]:
        if target > cost:
            predicted = predict_call(run, measured.slower_by(target - cost), measured)
            predictions[str(target)] = {
                "whole call s": predicted.whole_call_seconds,
                "s to ESS 1000": predicted.seconds_to_ess_1000,
                "sampler s": predicted.sampler_seconds,
            }
    return {
        "dim": dim,
        "cost": cost,
        "sampler": sampler,
        "seed": seed,
        "whole call s": run.whole_call_seconds,
        "s to ESS 1000": float(row["s to ESS 1000"]),
        "min ESS": float(min(row["min bulk ESS"], row["min tail ESS"])),
        "logps": float(row["logp evals/draw"]) * args["draws"] + run.tuning_evaluations[0],
        "gradients": float(row["grad evals/draw"]) * args["draws"] + run.tuning_evaluations[1],
        "measured cost": [measured.logp, measured.logp_and_gradient],
        "predictions": predictions,
    }


def run_in_process(dim: int, cost: float, sampler: str, seed: int, args) -> dict:
    """:func:`one_run` in a fresh Python process."""
    job = json.dumps([dim, cost, sampler, seed, vars(args)])
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one", job],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{sampler}, seed {seed}, cost {cost}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compared(runs: list[dict]) -> list[dict]:
    """Each prediction beside the measured run it predicts (same sampler, seed and dimension)."""
    measured = {(r["sampler"], r["seed"], r["cost"]): r for r in runs}
    rows = []
    for run in runs:
        for target, predicted in run["predictions"].items():
            actual = measured.get((run["sampler"], run["seed"], float(target)))
            if actual is None:
                continue
            rows.append(
                {
                    "sampler": run["sampler"],
                    "seed": run["seed"],
                    "from s": run["cost"],
                    "to s": float(target),
                    "call s: predicted": predicted["whole call s"],
                    "call s: measured": actual["whole call s"],
                    "call error %": _error(predicted["whole call s"], actual["whole call s"]),
                    "call error %, its cost measured": _error(
                        predicted["sampler s"] + _priced(run, actual["measured cost"]),
                        actual["whole call s"],
                    ),
                    "to ESS 1000 s: predicted": predicted["s to ESS 1000"],
                    "to ESS 1000 s: measured": actual["s to ESS 1000"],
                    "to ESS 1000 error %": _error(
                        predicted["s to ESS 1000"], actual["s to ESS 1000"]
                    ),
                    "same counts": run["logps"] == actual["logps"]
                    and run["gradients"] == actual["gradients"],
                }
            )
    return rows


def _priced(run: dict, cost: list[float]) -> float:
    """Seconds of ``run``'s evaluations at ``[logp, logp with gradient]`` seconds each."""
    logp, joint = cost
    return (run["logps"] - run["gradients"]) * logp + run["gradients"] * joint


def _error(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured


def summary(rows: list[dict]) -> list[dict]:
    """Median and largest absolute error over seeds, per sampler and pair of costs."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["sampler"], row["from s"], row["to s"]), []).append(row)
    out = []
    for (sampler, origin, target), members in groups.items():
        call = np.abs([m["call error %"] for m in members])
        measured = np.abs([m["call error %, its cost measured"] for m in members])
        to_ess = np.abs([m["to ESS 1000 error %"] for m in members])
        out.append(
            {
                "sampler": sampler,
                "from s": origin,
                "to s": target,
                "seeds": len(members),
                "call: median / max |error| %": f"{np.median(call):.1f} / {call.max():.1f}",
                "to ESS 1000: median / max |error| %": f"{np.median(to_ess):.1f} / "
                f"{to_ess.max():.1f}",
                "call, its cost measured: median / max |error| %": f"{np.median(measured):.1f}"
                f" / {measured.max():.1f}",
                "same counts": sum(m["same counts"] for m in members),
            }
        )
    return out


def markdown(report: dict) -> str:
    lines = ["# A cheap run's prediction of the costly call", "", str(report["meta"]), ""]
    lines += markdown_table(report["summary"], tuple(report["summary"][0]))
    lines += ["", "## Every prediction", ""]
    lines += markdown_table(report["rows"], tuple(report["rows"][0]))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--dim", type=int, default=5)
    parser.add_argument("--costs", default="0,0.001,0.003", help="seconds a solve sleeps")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30, help="calls to time the model")
    parser.add_argument("--output", default="call_prediction")
    parser.add_argument(
        "--tables", action="store_true", help="only rewrite the tables of --output's runs"
    )
    args = parser.parse_args()
    if args.tables:
        report = json.loads((RESULTS / f"{args.output}.json").read_text())
        report |= {"rows": compared(report["runs"])}
        report["summary"] = summary(report["rows"])
        write_results(args.output, report, markdown(report))
        return
    if args.one:
        dim, cost, sampler, seed, settings = json.loads(args.one)
        print(json.dumps(one_run(dim, cost, sampler, seed, settings), default=float))
        return
    args.costs = sorted(float(c) for c in args.costs.split(","))
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for sampler in args.samplers.split(","):
            for cost in args.costs:
                runs.append(run_in_process(args.dim, cost, sampler, seed, args))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "predictions"}))
    rows = compared(runs)
    meta = run_metadata(**{k: v for k, v in vars(args).items() if k != "one"})
    report = {"meta": meta, "summary": summary(rows), "rows": rows, "runs": runs}
    write_results(args.output, report, markdown(report))


if __name__ == "__main__":
    main()
