"""Would a decision before the first fit pay? Scored on the economy benchmark's counterfactuals.

    python -m benchmarks.economy --split tune --samplers "NUTS,NUTS dense,RNSHMC,RNSHMC exact" \\
        --output economy_tune_prefit
    python -m benchmarks.economy --split check_again --samplers "..." \\
        --output economy_check_again_prefit
    python -m benchmarks.economy --workloads kilpisjarvi_mod-kilpisjarvi,arK-arK,\\
        eight_schools-eight_schools_noncentered,garch-garch11 --samplers "..." \\
        --output economy_check_prefit
    python -m benchmarks.prefit_rules                       # the scores below, from those files

For every workload and seed the economy benchmark ran RNSHMC and "RNSHMC exact" (the same
chain, exact NUTS from where its first fit would come) beside PyMC's NUTS: a rule that gives
the surrogate up before its first fit turns that run into the counterfactual's, so a rule is
scored by replaying it on what the RNSHMC run knew at the fit (``prefit``). ``q`` is a run's
min(bulk, tail) ESS per second of the whole call over the better of NUTS and NUTS dense.

The candidate: give the surrogate up if the exploration's own ESS per draw ``e`` (its last half)
is at least ``MIN_EXPLORATION_ESS`` and an exact draw costs less than a surrogate draw is
predicted to, the fit included::

    t_exact < FIT_SECONDS / n + OVERHEAD + LOGPS_PER_DRAW * c

(``t_exact``: seconds of an exploration draw, ``c``: seconds per gradient, ``n``: draws left).
The constants come from the tune split alone: the fit's share of the setup (RNSHMC's setup
minus the counterfactual's, median 0.47 s), a surrogate draw's seconds against ``c`` (about
0.2 ms + 1.5 c), and the verdict's reliability floor (25 effective draws over 100). Reading
only; writes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
FILES = {
    "tune": "economy_tune_prefit.json",
    "check": "economy_check_prefit.json",
    "check_again": "economy_check_again_prefit.json",
}
SAMPLERS = ("NUTS", "NUTS dense", "RNSHMC", "RNSHMC exact")
FIT_SECONDS = 0.5
OVERHEAD = 0.2e-3
LOGPS_PER_DRAW = 1.5
MIN_EXPLORATION_ESS = 0.25
DRAWS = 2000
"""Tuning and kept draws of every run (1000 + 1000)."""


def runs(split: str, suffix: str = "") -> list[dict]:
    """One row per workload and seed: ``q``, the counterfactual's ``qx`` and the prefit.

    ``suffix`` names a later set of the three files (``economy_tune_prefit<suffix>.json``).
    """
    name = FILES[split].replace(".json", f"{suffix}.json")
    data = json.loads((RESULTS / name).read_text())
    rows = []
    for workload, result in data["workloads"].items():
        by_seed: dict[int, dict] = {}
        for run in result["runs"]:
            by_seed.setdefault(run["seed"], {})[run["sampler"]] = run
        for seed, samplers in sorted(by_seed.items()):
            if all(name in samplers for name in SAMPLERS):
                rows.append(_row(workload, seed, samplers))
    return rows


def _row(workload: str, seed: int, samplers: dict) -> dict:
    nuts = max(samplers["NUTS"]["ESS / s"], samplers["NUTS dense"]["ESS / s"])
    prefit = samplers["RNSHMC"]["prefit"]
    return {
        "workload": workload,
        "seed": seed,
        "q": samplers["RNSHMC"]["ESS / s"] / nuts,
        "qx": samplers["RNSHMC exact"]["ESS / s"] / nuts,
        "draws left": DRAWS - prefit["exploration draws"],
        "exact draw s": prefit["exact draw s"],
        "s per gradient": prefit["s per gradient"],
        "e": prefit["exploration ESS per draw"],
    }


def gives_up(row: dict) -> bool:
    """The candidate rule (module docstring)."""
    predicted = FIT_SECONDS / row["draws left"] + OVERHEAD + LOGPS_PER_DRAW * row["s per gradient"]
    return row["e"] >= MIN_EXPLORATION_ESS and row["exact draw s"] < predicted


def score(rows: list[dict], rule) -> dict:
    """What a rule does to a split's runs: switches right and wrong, and the ratios after."""
    switched = [rule(row) for row in rows]
    after = np.array([row["qx"] if s else row["q"] for row, s in zip(rows, switched, strict=True)])
    before = np.array([row["q"] for row in rows])
    better = [row["qx"] > row["q"] for row in rows]
    return {
        "runs": len(rows),
        "switched right": sum(s and b for s, b in zip(switched, better, strict=True)),
        "switched wrong": sum(s and not b for s, b in zip(switched, better, strict=True)),
        "missed": sum(b and not s for s, b in zip(switched, better, strict=True)),
        "median q": (float(np.median(before)), float(np.median(after))),
        "min q": (float(before.min()), float(after.min())),
        "geometric mean gain": float(np.exp(np.mean(np.log(after / before)))),
    }


RULES = {
    "candidate": gives_up,
    "always (the counterfactual)": lambda row: True,
    "oracle": lambda row: row["qx"] > row["q"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suffix", default="", help="score economy_*_prefit<suffix>.json")
    args = parser.parse_args()
    for split in FILES:
        rows = runs(split, args.suffix)
        for name, rule in RULES.items():
            result = score(rows, rule)
            (median_before, median_after), (min_before, min_after) = (
                result["median q"],
                result["min q"],
            )
            print(
                f"{split:11} {name:28} runs {result['runs']:2}, switched right "
                f"{result['switched right']:2}, wrong {result['switched wrong']:2}, missed "
                f"{result['missed']:2}; median q {median_before:.2f} -> {median_after:.2f}, min "
                f"{min_before:.2f} -> {min_after:.2f}, geometric mean gain "
                f"{result['geometric mean gain']:.2f}x"
            )


if __name__ == "__main__":
    main()
