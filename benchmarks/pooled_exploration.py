"""Pooled chains against separate ones: exact evaluations until the surrogate starts, ESS, means.

    python -m benchmarks.pooled_exploration --split tune        # posteriors the rules were set on
    python -m benchmarks.pooled_exploration --split check       # held out
    python -m benchmarks.pooled_exploration --posteriors banana --seeds 1 --chains 4 \\
        --tune 300 --draws 300 --output smoke_pooled_exploration    # smoke run

Per posterior (the splits of :mod:`benchmarks.start_rules`, fixed before this rule existed) and
seed, ``--chains`` chains of ``--tune`` + ``--draws`` sampled with RNSHMC and the posterior's
settings, in up to three ways (``--kinds``):

- **separate**: ``pm.sample(step=RNSHMC(), cores=1)``: every chain explores for one chain's
  length (``max(50, 1.5 d, 0.2 tune)`` draws, later while the fit is poor), fits and samples
  on its own;
- **pooled**: ``PooledSurrogate(RNSHMC())``: one surrogate on every chain's exact draws, each
  chain exploring for one chain's length (the default);
- **shared**: ``PooledSurrogate(RNSHMC(), share_exploration=True)``: the exploration shared
  too: each chain explores ``1 / chains`` of one chain's length, at least 50 draws, before the
  start rule judges the pooled fit on held-out draws.

Per run: exact logp and gradient evaluations until each chain's first surrogate draw and in the
whole call (all chains), the whole call in seconds, min bulk and tail ESS per kept draw (all
chains), and the largest ``|z|`` of a posterior mean against the reference (as
:mod:`benchmarks.start_rules` judges it). Results go to ``benchmarks/results/<output>.{json,md}``
after every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
import traceback
import warnings

import numpy as np

from benchmarks.measure import RESULTS, cell, run_metadata, write_results
from benchmarks.start_rules import CHECK, TUNE, Posterior, posterior_named
from pymc_rnshmc import RNSHMC, PooledSurrogate
from pymc_rnshmc.comparison import comparison_table, run_sampler

SLOW = ("lotka-volterra", "hudson-lynx-hare", "one_comp_mm_elim_abs-one_comp_mm_elim_abs")
"""ODE posteriors left out: minutes per chain, and the two split lists keep them for later."""


KINDS = ("separate", "pooled", "shared")


def sampler(posterior: Posterior, kind: str):
    def build():
        step = RNSHMC(**posterior.settings.step_options())
        if kind == "separate":
            return step
        return PooledSurrogate(step, share_exploration=kind == "shared")

    return build


def evaluations_before_start(trace) -> int:
    """Exact logp and gradient evaluations of all chains before each one's first surrogate draw."""
    warmup = trace.warmup_sample_stats
    spent = np.asarray(warmup["n_logp_evals"].values) + np.asarray(
        warmup["n_gradient_evals"].values
    )
    used = np.asarray(warmup["used_surrogate"].values, dtype=bool)
    first = np.where(used.any(axis=1), np.argmax(used, axis=1), used.shape[1])
    return int(sum(spent[chain, :start].sum() for chain, start in enumerate(first)))


def run(posterior: Posterior, kind: str, seed: int, args) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_sampler(
            sampler(posterior, kind),
            posterior.build(),
            name=kind,
            tune=args.tune,
            draws=args.draws,
            chains=args.chains,
            cores=1,
            random_seed=seed,
            progressbar=False,
            discard_tuned_samples=False,
            compute_convergence_checks=False,
            **posterior.start(),
        )
    row = comparison_table({kind: result}).iloc[0]
    trace = result.trace
    warmup, kept = trace.warmup_sample_stats, trace.sample_stats
    kept_draws = args.draws * args.chains
    return {
        "posterior": posterior.name,
        "kind": kind,
        "seed": seed,
        "evaluations before the surrogate": evaluations_before_start(trace),
        "evaluations in all": int(
            sum(
                g[s].values.sum()
                for g in (warmup, kept)
                for s in ("n_logp_evals", "n_gradient_evals")
            )
        ),
        "call s": round(result.whole_call_seconds, 1),
        "bulk ESS / draw": float(row["min bulk ESS"]) / kept_draws,
        "tail ESS / draw": float(row["min tail ESS"]) / kept_draws,
        "max |z| mean": None
        if posterior.z_of_means is None
        else float(posterior.z_of_means(trace.posterior)),
    }


def summary(rows: list[dict]) -> list[dict]:
    """Per posterior and pooled kind: over separate, medians over seeds; the worst mean."""
    out = []
    for name in dict.fromkeys(row["posterior"] for row in rows):

        def median(kind, key, name=name):
            values = [r[key] for r in rows if r["posterior"] == name and r["kind"] == kind]
            return float(np.median(values)) if values else float("nan")

        def worst(kind, name=name):
            values = [
                r["max |z| mean"]
                for r in rows
                if r["posterior"] == name and r["kind"] == kind and r["max |z| mean"] is not None
            ]
            return max(values) if values else float("nan")

        before = "evaluations before the surrogate"
        for kind in ("pooled", "shared"):
            if not any(r["posterior"] == name and r["kind"] == kind for r in rows):
                continue
            out.append(
                {
                    "posterior": name,
                    "kind": kind,
                    "seeds": len({r["seed"] for r in rows if r["posterior"] == name}),
                    "before: separate": median("separate", before),
                    "before": median(kind, before),
                    "in all / separate": median(kind, "evaluations in all")
                    / median("separate", "evaluations in all"),
                    "bulk ESS/draw / separate": median(kind, "bulk ESS / draw")
                    / median("separate", "bulk ESS / draw"),
                    "tail ESS/draw / separate": median(kind, "tail ESS / draw")
                    / median("separate", "tail ESS / draw"),
                    "call / separate": median(kind, "call s") / median("separate", "call s"),
                    "worst |z|: separate": worst("separate"),
                    "worst |z|": worst(kind),
                }
            )
    return out


def table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    keys = list(rows[0])
    lines = [
        "| " + " | ".join(k.replace("|", "\\|") for k in keys) + " |",
        "|---" * len(keys) + "|",
    ]
    return lines + ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rows]


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"## Pooled chains against separate ones, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; {meta['chains']} chains of {meta['tune']} + "
        f"{meta['draws']}, seeds {meta['seeds']}. Ratios of medians over the seeds.",
        "",
    ]
    return "\n".join(lines + table(summary(rows)) + [""] + table(rows)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "check"), default="tune")
    parser.add_argument("--posteriors", default=None, help="comma-separated; default the split")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--append", action="store_true", help="add to the output's runs; skip the ones it has"
    )
    args = parser.parse_args()
    if args.posteriors is not None:
        names = args.posteriors.split(",")
    else:
        names = [n for n in (CHECK if args.split == "check" else TUNE) if n not in SLOW]
    output = args.output or f"pooled_exploration_{args.split}"
    meta = run_metadata(
        chains=args.chains, tune=args.tune, draws=args.draws, seeds=args.seeds, posteriors=names
    )
    rows: list[dict] = []
    if args.append and (RESULTS / f"{output}.json").exists():
        rows = json.loads((RESULTS / f"{output}.json").read_text())["runs"]
    done = {(r["posterior"], r["kind"], r["seed"]) for r in rows}
    for name in names:
        posterior = posterior_named(name)
        for seed in (int(s) for s in args.seeds.split(",")):
            for kind in args.kinds.split(","):
                if (name, kind, seed) in done:
                    continue
                started = time.perf_counter()
                try:
                    rows.append(run(posterior, kind, seed, args))
                except Exception as err:  # one failure must not end the run
                    traceback.print_exc()
                    print(f"{name} {kind} {seed}: {type(err).__name__}: {err}", flush=True)
                    continue
                print(rows[-1], f"({time.perf_counter() - started:.0f} s)", flush=True)
                write_results(output, meta | {"runs": rows}, markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
