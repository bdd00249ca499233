"""Score the economy's verdict offline, on runs that forced each of its answers on the same chains.

    python -m benchmarks.verdict_arms          # the table of docs/benchmarks.md, from the files

Reads the ``economy_*_verdict_arms`` result files of ``benchmarks/economy.py`` ("RNSHMC keep"
and "RNSHMC give up" with the same seeds: one chain up to the verdict, then either answer) and,
where the arms' runs predate the recording of the fit's held-out error, the matching
``economy_*_verdict_accept`` file. For each chain the verdict is recomputed from the windows it
judged, by the package's :func:`~pymc_rnshmc.step_methods.economy.sampling_verdict`: "before"
without the fit's error (the rule before ``VERDICT_FIT_ERROR``), "now" with it. Each answer is
scored by the ESS per second of the call of the arm it picks, over the stronger NUTS run of the
seed.
"""

from __future__ import annotations

import json

import numpy as np

from benchmarks.measure import RESULTS
from pymc_rnshmc.step_methods.economy import Verdict, sampling_verdict

SPLITS = ("tune", "check", "check_again", "heldout", "heldout2", "hierarchical")
BASELINES = ("NUTS", "NUTS dense")


def _load(name: str) -> dict | None:
    path = RESULTS / f"economy_{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _fit_errors(split: str) -> dict:
    """Held-out error per (workload, seed) from the keep rows' records of what the verdict saw."""
    errors = {}
    for name in (f"{split}_verdict_accept", f"{split}_verdict_arms"):
        for workload, result in ((_load(name) or {}).get("workloads") or {}).items():
            for row in result["runs"]:
                seen = (row.get("prefit") or {}).get("verdict windows") or {}
                if "held-out error" in seen:
                    errors.setdefault((workload, row["seed"]), seen["held-out error"])
    return errors


def verdict_of(row: dict, fit_error: float) -> Verdict:
    """The verdict recomputed from a keep row's windows and costs."""
    measured, seen = row["prefit"]["verdict"], row["prefit"]["verdict windows"]
    seconds = (measured["exact_seconds"], measured["surrogate_seconds"])
    exploration, since_fit = np.asarray(seen["exploration"]), np.asarray(seen["since fit"])
    return sampling_verdict(seconds, exploration, since_fit, fit_error)


def chains(split: str) -> list[dict]:
    """Per chain with a verdict: both arms' q, the fit's error, and the two rules' answers."""
    report, errors, out = _load(f"{split}_verdict_arms"), _fit_errors(split), []
    for workload, result in ((report or {}).get("workloads") or {}).items():
        rows = [r for r in result["runs"] if "error" not in r]
        for seed in sorted({r["seed"] for r in rows}):
            of_seed = {r["sampler"]: r for r in rows if r["seed"] == seed}
            keep, give = of_seed.get("RNSHMC keep"), of_seed.get("RNSHMC give up")
            if keep is None or give is None or not (keep.get("prefit") or {}).get("verdict"):
                continue
            best = max(of_seed[b]["ESS / s"] for b in BASELINES if b in of_seed)
            error = errors.get((workload, seed), np.nan)
            out.append(
                {
                    "workload": workload,
                    "seed": seed,
                    "keep": keep["ESS / s"] / best,
                    "give up": give["ESS / s"] / best,
                    "fit error": error,
                    "before": verdict_of(keep, np.nan).surrogate_pays,
                    "now": verdict_of(keep, error).surrogate_pays,
                }
            )
    return out


def _score(values: list[float]) -> str:
    return f"{np.exp(np.mean(np.log(values))):.2f} / {sum(v < 0.9 for v in values)}"


def main() -> None:
    print("| split (chains) | always keep | always give up | before | now | best per chain |")
    print("|---|---|---|---|---|---|")
    for split in SPLITS:
        found = chains(split)
        if not found:
            continue
        pick = {
            rule: [c["keep"] if c[rule] else c["give up"] for c in found]
            for rule in ("before", "now")
        }
        cells = [
            _score([c["keep"] for c in found]),
            _score([c["give up"] for c in found]),
            _score(pick["before"]),
            _score(pick["now"]),
            f"{np.exp(np.mean(np.log([max(c['keep'], c['give up']) for c in found]))):.2f}",
        ]
        print(f"| {split} ({len(found)}) | " + " | ".join(cells) + " |")
        for c in found:
            if c["before"] != c["now"]:
                print(
                    f"|   changed: {c['workload']} seed {c['seed']} (error {c['fit error']:.2f}) | "
                    f"keep {c['keep']:.2f} | give up {c['give up']:.2f} | | | |"
                )


if __name__ == "__main__":
    main()
