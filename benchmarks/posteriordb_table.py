"""posteriordb's reference posteriors: MCSE checks, ESS per second against NUTS, divergences.

    python -m benchmarks.posteriordb_table                       # the default set, see below
    python -m benchmarks.posteriordb_table --posteriors sblrc-blr --tune 200 --draws 200 \\
        --output smoke_posteriordb                               # smoke run, about 2 minutes
    python -m benchmarks.posteriordb_table --posteriors all      # also the expensive ones
    python -m benchmarks.posteriordb_table --samplers RNSHMC,ARNSHMC

For each posterior (``--posteriors``: comma-separated names, or ``all``) the models of
:mod:`pymc_rnshmc.workloads.posteriordb` run through :func:`pymc_rnshmc.compare_samplers`, one
call per sampler (so one sampler's failure is recorded and the run goes on), every call with the
same ``--tune``, ``--draws``, ``--chains`` (one core) and ``--seed``: PyMC's NUTS, ``RNSHMC``,
``ARNSHMC``, ``SparseGridHMC`` (only up to ``MAX_GRID_DIMENSION`` = 10 parameters, the "about
2 to 10" its docstring gives) and ``RNSRMHMC``, all with their defaults except the settings of
``SETTINGS`` (the ones the collection's README used for NUTS, given to every sampler). NUTS is
``pm.sample(nuts_sampler="pymc")`` with its default initialisation, or, where ``SETTINGS`` has
a dense metric or a target acceptance, ``pm.NUTS`` with them (PyMC's adaptive dense mass matrix
from the initial point, no jitter). Data and reference summaries are the test data's
(``tests/data/posteriordb``). Writes ``benchmarks/results/<output>.{json,md}`` (``--output``,
default ``posteriordb_table``) after every posterior and prints the Markdown table.

Default set: every posterior whose PyMC NUTS run takes at most about 10 minutes at the
default sizes, that is all but ``gp_pois_regr-gp_pois_regr`` (the collection's README measured
about 8 CPU-minutes per NUTS chain of 1000 iterations, tree depth 7-8 through an 11 x 11
Cholesky: about 32 minutes for 2 x (1000 + 1000)). ``one_comp_mm_elim_abs`` (the ODE solved by
BDF, no gradient) has no NUTS: its samplers are compared with the reference only. The default
set at the default sizes (2 chains x (1000 + 1000)) took 23 minutes on the project's 2-core
machine (2026-11-24, PyMC 6.4), 6 of them on ``mcycle_gp-accel_gp`` (d = 66, target acceptance
0.95).

Columns, per posterior and sampler:

* means, sds: the reference parameters whose mean and sd pass, out of all. Mean:
  ``|m - mean_ref| < 4 sqrt(s^2 / ESS + mcse_mean_ref^2)``, ESS the run's bulk ESS of the
  parameter. Sd: ``|s - sd_ref| < 4 sqrt(mcse_sd^2 + mcse_sd_ref^2)``, ``mcse_sd`` from the
  ESS of the squared deviations (``tests.checks.sd_error_in_mcse``) and
  ``mcse_sd_ref = sd_ref sqrt((kurtosis_ref - 1) / (4 ess_bulk_ref))`` (kurtosis 3 where the
  reference has none). For ``one_comp_mm_elim_abs`` both on the log scale of every parameter
  (``log_scale_summary.json``): ``K_m`` and ``V_m`` have infinite variance.
* max z mean, max z sd: the largest of those errors in their MCSE; min ESS: the smallest bulk
  ESS of a reference parameter (below 200 the checks are weak, marked "weak").
* call s: the whole ``pm.sample`` call (step construction, tuning, fits, draws).
* ESS/s call, ESS/s draws: min bulk ESS over every coordinate of the trace (``compare_samplers``)
  per second of the whole call and of the draws after tuning (the steps' own timers), each
  also as a multiple of PyMC NUTS's (``x NUTS``).
* divergences: after tuning.
* surrogate draws: the share of the draws after tuning that the surrogate proposed (the rest
  are exact: the safety net's, or all of them after a fall-back to exact NUTS).
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse
import json
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pymc as pm
from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt

from benchmarks.measure import run_metadata, write_results
from pymc_rnshmc import ARNSHMC, RNSHMC, RNSRMHMC, SparseGridHMC, compare_samplers
from pymc_rnshmc.step_methods.exact_model import has_gradient
from pymc_rnshmc.workloads.posteriordb import POSTERIORS, load_posterior, reference_parameter
from tests.checks import effective_sample_size, mean_error_in_mcse, sd_error_in_mcse

POSTERIORDB = Path(__file__).resolve().parents[1] / "tests" / "data" / "posteriordb"
NUTS = "PyMC NUTS"
SAMPLERS = {
    "RNSHMC": RNSHMC,
    "ARNSHMC": ARNSHMC,
    "SparseGridHMC": SparseGridHMC,
    "RNSRMHMC": RNSRMHMC,
}
MAX_GRID_DIMENSION = 10
K_SIGMA = 4.0
WEAK_ESS = 200
EXPENSIVE = {
    "gp_pois_regr-gp_pois_regr": "PyMC NUTS about 8 CPU-minutes per chain of 1000 iterations",
}
"""Left out of the default set: NUTS alone would take well over 10 minutes."""


@dataclass(frozen=True)
class Settings:
    """Sampler settings of one posterior, given to NUTS and to every surrogate sampler."""

    target_accept: float | None = None
    dense_metric: bool = False

    def step_options(self) -> dict[str, Any]:
        """Keyword arguments of a step built inside the model's context."""
        options: dict[str, Any] = {}
        if self.target_accept is not None:
            options["target_accept"] = self.target_accept
        if self.dense_metric:
            options["potential"] = dense_adaptive_metric(pm.modelcontext(None))
        return options


SETTINGS = {
    # intercept/slope correlation -0.99999: NUTS with a diagonal metric runs at tree depth 8
    "kilpisjarvi_mod-kilpisjarvi": Settings(dense_metric=True),
    "eight_schools-eight_schools_noncentered": Settings(target_accept=0.95),
    # badly conditioned design: the README ran NUTS with a dense metric only
    "diamonds-diamonds": Settings(dense_metric=True),
    # 2 x (500 + 500) at target 0.95 failed (140 divergences); 1000 tuning draws pass
    "mcycle_gp-accel_gp": Settings(target_accept=0.95),
    "gp_pois_regr-gp_pois_regr": Settings(target_accept=0.9),
}


def dense_adaptive_metric(model: pm.Model) -> QuadPotentialFullAdapt:
    """PyMC's adaptive dense mass matrix, centred on the model's initial point."""
    initial_point = model.initial_point()
    start = np.concatenate([np.ravel(initial_point[var.name]) for var in model.value_vars])
    return QuadPotentialFullAdapt(start.size, start)


def step_factory(step_class: type, settings: Settings) -> Callable[[], Any]:
    """A step of ``step_class`` with the posterior's settings, built in the model's context."""

    def build():
        return step_class(**settings.step_options())

    return build


def dimension(model: pm.Model) -> int:
    """Number of sampled (unconstrained) parameters."""
    return sum(np.size(value) for value in model.initial_point().values())


# ----------------------------------------------------------------- checks
def log_scale_reference(name: str, reference: dict) -> dict | None:
    """The log-scale summaries of a posterior whose natural-scale sds are infinite, if any.

    Their bulk ESS is the natural scale's (ranks do not change under the log).
    """
    path = POSTERIORDB / name / "log_scale_summary.json"
    if not path.exists():
        return None
    return {"ess_bulk": reference["ess_bulk"], **json.loads(path.read_text())}


def reference_checks(posterior, reference: dict, log_scale: bool) -> dict:
    """z of every reference mean and sd in combined MCSE, and the bulk ESS of each parameter."""
    kurtoses = reference.get("kurtosis") or [None] * len(reference["names"])
    checks = {}
    for index, name in enumerate(reference["names"]):
        draws = np.asarray(reference_parameter(posterior, name), dtype=float)
        draws = np.log(draws) if log_scale else draws
        sd, kurtosis = reference["sd"][index], kurtoses[index] or 3.0
        reference_mcse_sd = sd * np.sqrt((kurtosis - 1.0) / (4.0 * reference["ess_bulk"][index]))
        checks[name] = {
            "mean": float(draws.mean()),
            "sd": float(draws.std(ddof=1)),
            "z_mean": float(
                mean_error_in_mcse(draws, reference["mean"][index], reference["mcse_mean"][index])
            ),
            "z_sd": float(sd_error_in_mcse(draws, sd, reference_mcse_sd)),
            "bulk_ess": effective_sample_size(draws, "bulk"),
        }
    return checks


def summarize_checks(checks: dict) -> dict:
    """Passes out of all, the largest z of means and sds, the smallest bulk ESS."""
    z_mean = [check["z_mean"] for check in checks.values()]
    z_sd = [check["z_sd"] for check in checks.values()]
    return {
        "means_passed": int(sum(z < K_SIGMA for z in z_mean)),
        "sds_passed": int(sum(z < K_SIGMA for z in z_sd)),
        "parameters": len(checks),
        "max_z_mean": float(np.nanmax(z_mean)),
        "max_z_sd": float(np.nanmax(z_sd)),
        "min_reference_ess": float(min(check["bulk_ess"] for check in checks.values())),
    }


# ----------------------------------------------------------------- running
def runs_of(name: str, model: pm.Model, samplers: list[str]) -> dict[str, dict]:
    """The ``compare_samplers`` arguments of every run on one posterior, or why it is skipped."""
    settings = SETTINGS.get(name, Settings())
    d = dimension(model)
    runs: dict[str, dict] = {}
    if not has_gradient(model, model.value_vars):
        runs[NUTS] = {"skipped": "no NUTS: the logp has no gradient; compared with the reference"}
    elif settings == Settings():
        runs[NUTS] = {"samplers": {}, "nuts": True}
    else:
        runs[NUTS] = {"samplers": {NUTS: step_factory(pm.NUTS, settings)}, "nuts": False}
    for sampler in samplers:
        if sampler == "SparseGridHMC" and d > MAX_GRID_DIMENSION:
            runs[sampler] = {"skipped": f"d = {d} > {MAX_GRID_DIMENSION}"}
        else:
            factory = step_factory(SAMPLERS[sampler], settings)
            runs[sampler] = {"samplers": {sampler: factory}, "nuts": False}
    return runs


def run_one(model: pm.Model, run: dict, args) -> dict:
    """One ``compare_samplers`` call: its table row and its posterior."""
    comparison = compare_samplers(
        model,
        run["samplers"],
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        cores=1,
        random_seed=args.seed,
        nuts=run["nuts"],
        nutpie=False,
        progressbar=False,
    )
    if not comparison.runs:
        return {"skipped": "; ".join(comparison.skipped.values())}
    (sampler_run,) = comparison.runs.values()
    row = comparison.table.iloc[0]
    stats = sampler_run.trace.sample_stats
    return {
        "posterior": sampler_run.trace.posterior,
        "surrogate_share": (
            float(np.mean(stats["used_surrogate"].values)) if "used_surrogate" in stats else None
        ),
        "whole_call_seconds": float(row["whole call s"]),
        "draw_seconds": float(row["draws s"]),
        "min_bulk_ess": float(row["min bulk ESS"]),
        "ess_per_second_call": float(row["bulk ESS/s (call)"]),
        "ess_per_second_draws": float(row["bulk ESS/s (draws)"]),
        "accept": float(row["accept"]),
        "divergences": int(row["divergences"]),
    }


def relative_to_nuts(results: dict) -> None:
    """Add each run's ESS per second as a multiple of NUTS's, where NUTS ran."""
    nuts = results.get(NUTS, {})
    for result in results.values():
        for key in ("ess_per_second_call", "ess_per_second_draws"):
            if key in result and key in nuts:
                result[f"{key}_vs_nuts"] = result[key] / nuts[key]


def run_posterior(name: str, samplers: list[str], args) -> dict:
    """Every run on one posterior, its checks against the reference, and its notes."""
    data, reference = load_posterior(name, POSTERIORDB)
    log_reference = log_scale_reference(name, reference)
    model = POSTERIORS[name](data)
    report = {"posterior": name, "dimension": dimension(model), "results": {}}
    if log_reference is not None:
        report["note"] = "checks on the log scale (infinite-variance parameters)"
    for sampler, run in runs_of(name, model, samplers).items():
        print(f"{name}: {sampler}", flush=True)
        if "skipped" in run:
            report["results"][sampler] = run
            continue
        try:
            result = run_one(model, run, args)
        except Exception as err:  # one sampler's failure must not end the run
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"}
        if "posterior" in result:
            checks = reference_checks(
                result.pop("posterior"), log_reference or reference, log_reference is not None
            )
            result.update(summarize_checks(checks), checks=checks)
        report["results"][sampler] = result
        print(f"  {summary_line(result)}", flush=True)
    relative_to_nuts(report["results"])
    return report


# ----------------------------------------------------------------- reporting
def fmt(value, spec: str) -> str:
    """``value`` formatted by ``spec``, or "-" when missing."""
    return "-" if value is None else format(value, spec)


def summary_line(result: dict) -> str:
    """One progress line of a run."""
    if "error" in result or "skipped" in result:
        return result.get("error") or f"skipped: {result['skipped']}"
    return (
        f"means {result['means_passed']}/{result['parameters']}, sds {result['sds_passed']}/"
        f"{result['parameters']}, max z {result['max_z_mean']:.1f} / {result['max_z_sd']:.1f}, "
        f"min ESS {result['min_reference_ess']:.0f}, call {result['whole_call_seconds']:.1f} s, "
        f"divergences {result['divergences']}"
    )


COLUMNS = (
    "| posterior | d | sampler | means | sds | max z mean | max z sd | min ESS | call s "
    "| ESS/s call | x NUTS | ESS/s draws | x NUTS | divergences | surrogate draws |"
)


def table_row(name: str, d: int, sampler: str, result: dict) -> str:
    """One Markdown row: the checks, the speeds and the divergences of a run."""
    if "error" in result or "skipped" in result:
        why = f"error: {result['error']}" if "error" in result else result["skipped"]
        why = " ".join(why.replace("|", "/").split())
        return f"| {name} | {d} | {sampler} | {why} |" + " |" * 11
    parameters = result["parameters"]
    ess = fmt(result["min_reference_ess"], ".0f")
    if result["min_reference_ess"] < WEAK_ESS:
        ess += " weak"
    cells = [
        name,
        str(d),
        sampler,
        f"{result['means_passed']}/{parameters}",
        f"{result['sds_passed']}/{parameters}",
        fmt(result["max_z_mean"], ".1f"),
        fmt(result["max_z_sd"], ".1f"),
        ess,
        fmt(result["whole_call_seconds"], ".1f"),
        fmt(result["ess_per_second_call"], ".3g"),
        fmt(result.get("ess_per_second_call_vs_nuts"), ".2f"),
        fmt(result["ess_per_second_draws"], ".3g"),
        fmt(result.get("ess_per_second_draws_vs_nuts"), ".2f"),
        str(result["divergences"]),
        fmt(result["surrogate_share"], ".0%"),
    ]
    return "| " + " | ".join(cells) + " |"


def notes(report: dict) -> list[str]:
    """What the rows of one posterior do not say themselves."""
    lines = []
    if report["results"].get(NUTS, {}).get("skipped"):
        lines.append(
            f"- {report['posterior']}: no NUTS (the model's logp has no gradient): the samplers "
            "are compared with the reference only, and there is no x NUTS."
        )
    if "note" in report:
        lines.append(f"- {report['posterior']}: {report['note']}.")
    return lines


def markdown(reports: list[dict], meta: dict, left_out: dict[str, str]) -> str:
    """The table of every posterior and sampler, under the run's metadata and notes."""
    lines = [
        f"## posteriordb reference posteriors, {meta['date']}",
        "",
        f"pymc {meta['pymc']}; {meta['machine']}; tune {meta['tune']}, draws {meta['draws']}, "
        f"chains {meta['chains']}, seed {meta['seed']}. Checks within {K_SIGMA:g} combined MCSE; "
        "columns: see the docstring of `benchmarks/posteriordb_table.py`.",
        "",
        COLUMNS,
        "|---" * 15 + "|",
    ]
    extra = []
    for report in reports:
        if "error" in report:
            extra.append(f"- {report['posterior']}: error {report['error']}")
            continue
        for sampler, result in report["results"].items():
            lines.append(table_row(report["posterior"], report["dimension"], sampler, result))
        extra += notes(report)
    extra += [f"- {name}: not run ({why})." for name, why in left_out.items()]
    return "\n".join([*lines, "", *extra, ""])


def chosen_posteriors(text: str | None, parser) -> list[str]:
    """``--posteriors``: names, ``all``, or by default all but the expensive ones."""
    if text is None:
        return [name for name in POSTERIORS if name not in EXPENSIVE]
    if text == "all":
        return list(POSTERIORS)
    names = text.split(",")
    unknown = set(names) - set(POSTERIORS)
    if unknown:
        parser.error(f"unknown {sorted(unknown)}; choose from {list(POSTERIORS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posteriors", default=None, help="comma-separated names, or 'all'")
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", default="posteriordb_table", help="result file stem")
    args = parser.parse_args()
    names = chosen_posteriors(args.posteriors, parser)
    samplers = args.samplers.split(",")
    if set(samplers) - set(SAMPLERS):
        parser.error(f"unknown samplers {sorted(set(samplers) - set(SAMPLERS))}")
    warnings.filterwarnings("ignore", "QuadPotentialFullAdapt is an experimental feature")
    left_out = {name: why for name, why in EXPENSIVE.items() if name not in names}
    meta = run_metadata(
        tune=args.tune,
        draws=args.draws,
        chains=args.chains,
        seed=args.seed,
        posteriors=names,
        samplers=samplers,
    )
    reports = []
    for name in names:
        try:
            reports.append(run_posterior(name, samplers, args))
        except Exception as err:  # e.g. a model that fails to build
            traceback.print_exc()
            reports.append({"posterior": name, "error": f"{type(err).__name__}: {err}"})
        text = markdown(reports, meta, left_out)
        write_results(args.output, meta | {"reports": reports}, text)
    print(text)


if __name__ == "__main__":
    main()
