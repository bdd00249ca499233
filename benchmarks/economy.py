"""Does the surrogate pay for itself? RNSHMC's whole call against PyMC's NUTS, cheap to costly.

    python -m benchmarks.economy --split tune                 # what the economy rules were set on
    python -m benchmarks.economy --split check                # held out
    python -m benchmarks.economy --workloads sleep_0.0003 --seeds 1 --tune 300 --draws 300 \\
        --output smoke_economy                                # smoke run, a minute
    python -m benchmarks.economy --split tune --before ../before --samplers "RNSHMC before"
    python -m benchmarks.economy --split tune --samplers RNSHMC --update   # rerun one sampler

Every run is its own process (``--one``), so each pays its own compilation, as a user's call
does; runs go one after another. Samplers (``--samplers``): "NUTS" (PyMC's, diagonal
adaptation), "NUTS dense" (``init="jitter+adapt_full"``), "RNSHMC" (its defaults, this tree)
"RNSHMC before" (the defaults of the tree at ``--before``, a ``git worktree`` of an older
commit: the same script, that tree's package), "RNSHMC exact" (a study: RNSHMC that
continues with exact NUTS where it would fit its first surrogate, the counterfactual of a rule
that gives the surrogate up before its first fit), and "RNSHMC keep" / "RNSHMC give up" (a
study of the verdict: its answer forced one way, so the two runs of a seed are one chain up
to the verdict and then either answer's outcome; only these record the windows it judged).

Workloads: "sleep_<s>" (``x ~ N(0, C)``, d = 5, AR(1) correlation 0.6, through a forward model
that sleeps ``s`` seconds a call: the model's cost alone varies), "sleep20_<s>" (the same at
d = 20), "banana", "gaussian_process", "pde_30", "pde_60" (the benchmark workloads),
"hierarchical_<groups>" (:func:`~pymc_rnshmc.workloads.hierarchical_logistic_regression`) and
posteriordb posteriors by name. Split, fixed before the runs: ``TUNE`` holds what the economy's
rules were looked at on while they were written; ``CHECK`` is held out.

Per run: the whole call in seconds, min bulk and tail ESS (ArviZ), their minimum per second of
the call, exact logps and gradients to a min(bulk, tail) ESS of 1000
(:func:`pymc_rnshmc.comparison.comparison_table`), whether the chain continued with exact NUTS
(share of kept draws in phase 3), the surrogate's setup seconds, and the largest ``|z|`` of a
posterior mean: against the exact mean (sleeping models), the posteriordb reference, or else the
pooled NUTS runs of the workload, in combined MCSE; for the RNSHMC runs, what the chain knew at
its first fit (``prefit``: :func:`prefit_record`). Per workload: medians over seeds, and each
surrogate run's ESS per second of the call as a ratio to the strongest NUTS run of its seed.
Results go to ``benchmarks/results/<output>.{json,md}`` after every workload; with
``--update`` the runs of the given samplers replace theirs in an earlier result of that name
and the others' are kept.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TUNE = ("sleep_0", "sleep_0.0001", "sleep_0.0003", "sleep_0.001", "sleep_0.003", "pde_30", "banana")
CHECK = (
    "sleep20_0.0003",
    "gaussian_process",
    "pde_60",
    "kilpisjarvi_mod-kilpisjarvi",
    "arK-arK",
    "eight_schools-eight_schools_noncentered",
    "garch-garch11",
)
CHECK_AGAIN = (
    "sblrc-blr",
    "low_dim_gauss_mix-low_dim_gauss_mix",
    "nes2000-nes",
    "sharp-banana",
    "student-t",
    "log-gamma",
)
"""Held out from the verdict's revision, which came after ``CHECK`` had been run (its floor on
the surrogate's own ESS estimate kept poorly mixing surrogates on the check set)."""
BASELINES = ("NUTS", "NUTS dense")


def build_model(workload: str):
    """The workload's model, and its exact means where known (else ``None``)."""
    from benchmarks.trust_battery import REFERENCES

    if workload.startswith("sleep"):
        from pymc_rnshmc.workloads import sleeping_normal

        prefix, seconds = workload.split("_")
        dim = 5 if prefix == "sleep" else int(prefix[len("sleep") :])
        return sleeping_normal(dim, float(seconds)), {"x": np.zeros(dim)}
    if workload.startswith("hierarchical_"):
        from pymc_rnshmc.workloads import hierarchical_logistic_regression

        return hierarchical_logistic_regression(int(workload.split("_")[1])), None
    if workload in ("banana", "gaussian_process", "pde_30", "pde_60"):
        from benchmarks.whole_call import WORKLOADS

        return WORKLOADS[workload][1](), None
    if workload in REFERENCES:
        reference = REFERENCES[workload]()
        return reference.build(), {reference.variable: reference.means}
    from benchmarks import posteriordb_table as pdb

    data, _ = pdb.load_posterior(workload, pdb.POSTERIORDB)
    return pdb.POSTERIORS[workload](data), None


def sampler_for(name: str):
    """``run_sampler``'s sampler and ``pm.sample`` options for a sampler's name."""
    from pymc_rnshmc import RNSHMC

    if name == "NUTS":
        return "pymc", {}
    if name == "NUTS dense":
        return "pymc", {"init": "jitter+adapt_full"}
    if name == "RNSHMC exact":
        _never_fit()
    if name in ("RNSHMC keep", "RNSHMC give up"):
        _force_verdict(pays=name == "RNSHMC keep")
        _record_verdict_windows()  # the study's draws: 0.1-0.2 MB a run, so only its arms
    return RNSHMC, {}


def _force_verdict(pays: bool) -> None:
    """The verdict's figures as measured, its answer forced (a study: both arms of one chain).

    "RNSHMC keep" keeps the surrogate whatever the verdict says, "RNSHMC give up" continues
    with exact NUTS when the verdict is due. Both runs are the same chain up to the verdict,
    so together they show what either answer would have given. This process only.
    """
    from pymc_rnshmc.step_methods.economy import Verdict

    Verdict.surrogate_pays = property(lambda verdict: pays)


def _record_verdict_windows() -> None:
    """Keep, on the economy, what the verdict saw: the draw count and fit positions at which it
    was made, the exact acceptance of the surrogate draws it judged, and the fit's held-out
    error."""
    from pymc_rnshmc.step_methods.warmup import SurrogateWarmup
    from pymc_rnshmc.surrogates.base import held_out_error

    watch, judge = SurrogateWarmup.watch_for_collapse, SurrogateWarmup.judge_sampling

    def watch_and_record(warmup, accept, iteration):
        warmup.__dict__.setdefault("accepts", []).append(float(accept))
        return watch(warmup, accept, iteration)

    def judge_and_record(warmup, draws, *new_metric):  # none for an older tree's warm-up
        economy = warmup.economy
        accepts = warmup.__dict__.get("accepts", [])
        accepts = accepts[max(len(accepts) - (len(draws) - economy.fitted_at), 0) :]
        economy.judged = (len(draws), economy.first_fit_at, economy.fitted_at)
        economy.judged_accept = float(np.mean(accepts)) if accepts else float("nan")
        economy.judged_error = float(held_out_error(warmup.surrogate))
        economy.judged_new_metric = bool(new_metric and new_metric[0])
        return judge(warmup, draws, *new_metric)

    SurrogateWarmup.watch_for_collapse = watch_and_record
    SurrogateWarmup.judge_sampling = judge_and_record


def _never_fit() -> None:
    """RNSHMC continues with exact NUTS where it would fit its first surrogate (a study).

    The counterfactual of a rule that gives the surrogate up before its first fit: the same
    exploration, mode search and step wrapper, then exact NUTS to the end. Replaces the
    warm-up's ``fit`` in this process only (each run is its own process).
    """
    from pymc_rnshmc.step_methods.schedule import Phase
    from pymc_rnshmc.step_methods.warmup import SurrogateWarmup

    def continue_exact(warmup, iteration, rng, host, end_of_tuning):
        warmup.phase = Phase.EXACT

    SurrogateWarmup.fit = continue_exact


def prefit_record(step) -> dict:
    """What the chain knew when it first fitted (or would have): for rules that decide before.

    The exploration's draws (how many; the seconds of each, its first with the compilation;
    gradients per draw and seconds per gradient, over the last half as the economy takes them),
    its effective draws per draw over the last half (relative to the whole exploration, as the
    verdict estimates exact NUTS's), and the verdict's figures if one was made. Empty for a step
    without a surrogate warm-up.
    """
    chain = getattr(step, "_chain", None)
    warmup = getattr(chain, "warmup", None)
    if warmup is None:
        return {}
    from pymc_rnshmc.step_methods.economy import effective_draws_per_draw

    economy = warmup.economy
    costs = economy.costs
    n_explored = len(costs.exact)
    exploration = np.asarray(chain.log.draws[:n_explored])
    half = exploration[n_explored // 2 :]
    verdict = economy.verdict
    return {
        "exploration draws": n_explored,
        "first fit at": economy.first_fit_at,
        "exploration s": float(np.sum(costs.exact)),
        "exact draw s": costs.exact_draw_seconds(),
        "s per gradient": costs.seconds_per_gradient(),
        "compile s": costs.compile_seconds(),
        "gradients per draw": float(np.mean(costs.exact_gradients[n_explored // 2 :]))
        if n_explored
        else np.nan,
        "exploration ESS per draw": effective_draws_per_draw(half, exploration)
        if n_explored >= 8
        else np.nan,
        "verdict": None if verdict is None else dataclasses.asdict(verdict),
        "verdict windows": _verdict_windows(chain, economy),
    }


def _verdict_windows(chain, economy) -> dict | None:
    """The draws the verdict judged (the exploration's and those since the fit, as lists to 4
    decimals), with the surrogate draws' exact acceptance and the fit's held-out error."""
    judged = getattr(economy, "judged", None)
    if judged is None:
        return None
    n_draws, first_fit_at, fitted_at = judged
    draws = np.round(np.asarray(chain.log.draws[:n_draws]), 4)
    return {
        "exploration": draws[:first_fit_at].tolist(),
        "since fit": draws[fitted_at:].tolist(),
        "exact acceptance": economy.judged_accept,
        "held-out error": economy.judged_error,
        "new metric": getattr(economy, "judged_new_metric", False),
    }


def one_run(workload: str, sampler: str, seed: int, tune: int, draws: int) -> dict:
    """One timed call in this process: the measurements of the module docstring."""
    from pymc_rnshmc.comparison import comparison_table, run_sampler
    from pymc_rnshmc.comparison.table import coordinate_ess

    model, _ = build_model(workload)
    step, options = sampler_for(sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_sampler(
            step,
            model,
            name=sampler,
            tune=tune,
            draws=draws,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            **options,
        )
    row = comparison_table({sampler: run}).iloc[0]
    posterior = run.trace.posterior
    means, errors = {}, {}
    for name in posterior.data_vars:
        values = np.asarray(posterior[name].values)
        values = values.reshape(values.shape[0], values.shape[1], -1)
        ess = coordinate_ess(values, "bulk")
        means[name] = values.mean(axis=(0, 1)).tolist()
        errors[name] = (values.std(axis=(0, 1)) / np.sqrt(ess)).tolist()
    z_of_reference = _posteriordb_z(workload, posterior)
    stats = run.trace.sample_stats
    phase = np.asarray(stats["phase"].values).ravel() if "phase" in stats else np.zeros(1)
    bulk, tail = float(row["min bulk ESS"]), float(row["min tail ESS"])
    extra = {} if z_of_reference is None else {"max |z| mean": z_of_reference}
    return extra | {
        "workload": workload,
        "sampler": sampler,
        "seed": seed,
        "call s": run.whole_call_seconds,
        "bulk ESS": bulk,
        "tail ESS": tail,
        "ESS / s": min(bulk, tail) / run.whole_call_seconds,
        "logps to ESS 1000": float(row["logps to ESS 1000"]),
        "gradients to ESS 1000": float(row["gradients to ESS 1000"]),
        "exact NUTS share": float(np.mean(phase == 3)),
        "setup s": float(getattr(run.step, "setup_seconds", 0.0) or 0.0),
        "prefit": prefit_record(run.step),
        "means": means,
        "mcse": errors,
    }


def _posteriordb_z(workload: str, posterior) -> float | None:
    """Largest ``|z|`` of a mean against the posteriordb reference (``None``: not one)."""
    from benchmarks import posteriordb_table as pdb

    if workload not in pdb.POSTERIORS:
        return None
    from benchmarks.start_rules import posteriordb_posterior

    return float(posteriordb_posterior(workload).z_of_means(posterior))


def run_in_process(workload: str, sampler: str, seed: int, args) -> dict:
    """:func:`one_run` in a fresh Python process (``--before``'s tree for "RNSHMC before")."""
    root = Path(args.before).resolve() if sampler == "RNSHMC before" else ROOT
    job = json.dumps([workload, sampler, seed, args.tune, args.draws])
    environment = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one", job],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {
            "workload": workload,
            "sampler": sampler,
            "seed": seed,
            "error": done.stderr[-2000:],
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


def z_of_means(rows: list[dict], workload: str) -> None:
    """Each run's largest ``|z|`` of a mean, against the exact, posteriordb or pooled NUTS means."""
    from benchmarks import posteriordb_table as pdb

    if workload in pdb.POSTERIORS:  # judged in the run, against the reference
        return
    _, reference = build_model(workload)
    reference_error = None
    if reference is None:
        nuts = [r for r in rows if r["sampler"] in BASELINES and "means" in r]
        if not nuts:
            return
        reference = {
            name: np.mean([r["means"][name] for r in nuts], axis=0) for name in nuts[0]["means"]
        }
        reference_error = {
            name: np.sqrt(np.sum(np.square([r["mcse"][name] for r in nuts]), axis=0)) / len(nuts)
            for name in nuts[0]["means"]
        }
    for row in rows:
        if "means" not in row:
            continue
        z = []
        for name, target in reference.items():
            if name not in row["means"]:
                continue
            error = np.asarray(row["mcse"][name]) ** 2
            if reference_error is not None:
                error = error + np.asarray(reference_error[name]) ** 2
            z.extend(np.abs(np.asarray(row["means"][name]) - np.ravel(target)) / np.sqrt(error))
        row["max |z| mean"] = float(np.max(z)) if z else None


def summarize(rows: list[dict], samplers: list[str]) -> list[dict]:
    """Medians over seeds per sampler, and the surrogate's ratios to the strongest NUTS run."""
    summary = []
    for sampler in samplers:
        mine = [r for r in rows if r["sampler"] == sampler and "error" not in r]
        if not mine:
            continue
        ratios = []
        for row in mine:
            nuts = [
                r["ESS / s"]
                for r in rows
                if r["sampler"] in BASELINES and r["seed"] == row["seed"] and "error" not in r
            ]
            if nuts and sampler not in BASELINES:
                ratios.append(row["ESS / s"] / max(nuts))
        summary.append(
            {
                "sampler": sampler,
                "runs": len(mine),
                **{
                    key: float(np.median([r[key] for r in mine]))
                    for key in ("call s", "bulk ESS", "tail ESS", "ESS / s", "logps to ESS 1000")
                },
                "vs strongest NUTS": [round(r, 2) for r in ratios],
                "exact NUTS share": [round(r["exact NUTS share"], 2) for r in mine],
                "max |z| mean": max((r.get("max |z| mean") or 0.0) for r in mine),
            }
        )
    return summary


def markdown(report: dict) -> str:
    lines = [f"# {report['title']}", "", f"{report['meta']}", ""]
    header = (
        "| workload | sampler | runs | call s | bulk ESS | tail ESS | ESS/s of the call | "
        "logps to ESS 1000 | ESS/s vs strongest NUTS, per seed | exact NUTS share, per seed "
        "| max abs z |"
    )
    lines += [header, "|" + "---|" * 11]
    for workload, result in report["workloads"].items():
        for s in result["summary"]:
            lines.append(
                f"| {workload} | {s['sampler']} | {s['runs']} | {s['call s']:.1f} | "
                f"{s['bulk ESS']:.0f} | {s['tail ESS']:.0f} | {s['ESS / s']:.1f} | "
                f"{s['logps to ESS 1000']:.3g} | {s['vs strongest NUTS']} | "
                f"{s['exact NUTS share']} | {s['max |z| mean']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--split", choices=("tune", "check", "check_again"))
    parser.add_argument("--workloads")
    parser.add_argument("--samplers", default="NUTS,NUTS dense,RNSHMC")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--before", help="a worktree of an older commit, for 'RNSHMC before'")
    parser.add_argument("--output")
    parser.add_argument("--update", action="store_true", help="replace these samplers' runs")
    args = parser.parse_args()
    if args.one:
        workload, sampler, seed, tune, draws = json.loads(args.one)
        print(json.dumps(one_run(workload, sampler, seed, tune, draws)))
        return
    from benchmarks.measure import run_metadata, write_results

    if args.workloads:
        workloads = args.workloads.split(",")
    elif args.split:
        workloads = list({"tune": TUNE, "check": CHECK, "check_again": CHECK_AGAIN}[args.split])
    else:
        parser.error("give --split or --workloads")
    samplers = args.samplers.split(",")
    if "RNSHMC before" in samplers and not args.before:
        parser.error("'RNSHMC before' needs --before")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    output = args.output or f"economy_{args.split or 'custom'}"
    report = {
        "title": f"Does the surrogate pay? ({args.split or 'custom'} workloads)",
        "meta": run_metadata(),
        "args": vars(args),
        "workloads": {},
    }
    earlier = {}
    if args.update:
        from benchmarks.measure import RESULTS

        earlier = json.loads((RESULTS / f"{output}.json").read_text())["workloads"]
        report["workloads"] = earlier
    for workload in workloads:
        rows = [
            row
            for row in earlier.get(workload, {}).get("runs", [])
            if row["sampler"] not in samplers
        ]
        for seed in seeds:
            for sampler in samplers:
                row = run_in_process(workload, sampler, seed, args)
                rows.append(row)
                brief = {k: v for k, v in row.items() if k not in ("means", "mcse")}
                print(json.dumps(brief), flush=True)
        z_of_means(rows, workload)
        every = list(dict.fromkeys(row["sampler"] for row in rows))
        report["workloads"][workload] = {"runs": rows, "summary": summarize(rows, every)}
        write_results(output, report, markdown(report))


if __name__ == "__main__":
    main()
