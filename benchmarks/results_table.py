"""The results table at the top of ``docs/benchmarks.md``, generated from the result files.

    python -m benchmarks.results_table            # print the table
    python -m benchmarks.results_table --write    # replace it in docs/benchmarks.md and index.md

Every row is one workload (and width) of a result file in :data:`SOURCES`, measured with the
current defaults. Per seed, RNSHMC's bulk ESS per second of the whole call is divided by the most
bulk ESS per second of the baseline runs (PyMC NUTS or nutpie, whichever the file ran), and its
tail ESS per second by the most tail ESS per second; the two may come from different baselines. The
whole call and the exact logps needed for a min(bulk, tail) ESS of 1000 are shown for RNSHMC and
for the baseline with the most min(bulk, tail) ESS per second. Shown are the medians over seeds
(and their range when there are several). A baseline whose every draw was rejected (acceptance 0:
it never moved) counts as no ESS at all. The table stands at the top of ``docs/benchmarks.md`` and
on the landing page; ``tests/test_results_table.py`` checks that both hold what this script makes
of the files.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
DOCS = Path(__file__).parents[1] / "docs"
PAGES = (DOCS / "benchmarks.md", DOCS / "index.md")
"""The pages that show the table, between :data:`START` and :data:`END`."""
START, END = "<!-- results-table:start -->", "<!-- results-table:end -->"

SOURCES = (
    ("wide_models_mode", "python -m benchmarks.wide_models --dims 20,40,80 --seeds 1,2", ""),
    ("wide_models_mode_wide", "python -m benchmarks.wide_models --dims 160,320", ""),
    (
        "wide_models_width_stop_baseline",
        "python -m benchmarks.wide_models --dims 20,40,80,160 --seeds 1,2 "
        '--samplers "RNSHMC,nutpie low-rank"',
        "baseline nutpie low-rank alone (the strongest in the earlier runs at these widths); "
        "after the fits' width search stops early",
    ),
    (
        "wide_models_held_out_period",
        "python -m benchmarks.wide_models --dims 80,160 --seeds 1,2 "
        '--samplers "RNSHMC,nutpie low-rank"',
        "baseline nutpie low-rank alone; after the quarter period from held-out draws",
    ),
    (
        "wide_models_first_refit_320",
        "python -m benchmarks.wide_models --dims 320 --seeds 1,2 "
        '--samplers "RNSHMC,nutpie low-rank"',
        "baseline nutpie low-rank alone; after the first refit that comes with half again as "
        "many points where the record cannot double in time",
    ),
    (
        "wide_models_exact_work_80",
        "python -m benchmarks.wide_models --dims 80 --seeds 1,2 "
        '--samplers "RNSHMC,RNSHMC net 0.05,RNSHMC exploring 120,nutpie low-rank"',
        "baseline nutpie low-rank alone; RNSHMC's draws are those of wide_models_held_out_period, "
        "timed again beside the baseline; the study's other two samplers are not in the table",
    ),
    (
        "wide_models_hierarchical",
        "python -m benchmarks.wide_models --workload hierarchical",
        "baselines PyMC NUTS and nutpie low-rank",
    ),
    (
        "wide_models_hierarchical_fallback",
        "python -m benchmarks.wide_models --workload hierarchical --dims 50,100,200 "
        '--samplers "RNSHMC,NUTS dense,nutpie low-rank"',
        "baselines PyMC NUTS dense and nutpie low-rank; after exact NUTS's metric from the "
        "chain's draws",
    ),
    (
        "wide_models_hierarchical_verdict",
        "python -m benchmarks.wide_models --workload hierarchical --dims 50 "
        '--samplers "RNSHMC,NUTS dense,nutpie low-rank"',
        "baselines PyMC NUTS dense and nutpie low-rank; after the verdict's rule for a new metric",
    ),
    (
        "wide_models_hierarchical_100_gives_up",
        "python -m benchmarks.wide_models --workload hierarchical --dims 100 --seeds 1,2 "
        '--samplers "RNSHMC,NUTS dense,nutpie low-rank"',
        "baselines PyMC NUTS dense and nutpie low-rank; the verdict gives the poor fit up",
    ),
    (
        "wide_models_mcycle_gp",
        "python -m benchmarks.wide_models --workload mcycle_gp",
        "baselines PyMC NUTS diagonal and dense; nutpie diagonal and low-rank never moved",
    ),
    (
        "economy_check_mode",
        "python -m benchmarks.economy --split check",
        "held out; NUTS runs from an earlier run",
    ),
    (
        "economy_tune_prefit2",
        "python -m benchmarks.economy --split tune "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC exact"',
        "the posteriors the economy's rules were written on",
    ),
    (
        "economy_check_prefit2",
        "python -m benchmarks.economy --workloads <the four posteriordb ones of the check split> "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC exact"',
        "held out",
    ),
    (
        "economy_check_again_prefit2",
        "python -m benchmarks.economy --split check_again "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC exact"',
        "held out",
    ),
    (
        "economy_verdict_fit_error",
        "python -m benchmarks.economy --workloads "
        "eight_schools-eight_schools_noncentered,student-t "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC before"',
        "with the verdict's fit-error rule, which was chosen on these two posteriors; the code "
        "before it, in the same run: bulk / tail medians 0.25x / 0.15x (eight schools), "
        "0.61x / 0.57x (Student-t), so the Student-t's gain over its earlier row is not the rule's",
    ),
    (
        "economy_check_now",
        "python -m benchmarks.economy --workloads <the four posteriordb ones of the check split> "
        '--samplers "NUTS,NUTS dense,RNSHMC"',
        "held out; the code after the fits' width search and the exploring metric's velocity, "
        "run beside economy_check_again_now (one core each)",
    ),
    (
        "economy_check_again_now",
        'python -m benchmarks.economy --split check_again --samplers "NUTS,NUTS dense,RNSHMC"',
        "held out; as economy_check_now",
    ),
    (
        "economy_poor_fit_refit_others",
        "python -m benchmarks.economy --workloads <seven posteriordb and battery posteriors> "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC before"',
        "after the logp-only function on demand and no scan for a poor fit before the verdict; "
        "run beside economy_poor_fit_refit (one core each)",
    ),
    (
        "economy_poor_fit_refit",
        "python -m benchmarks.economy --workloads "
        "student-t,eight_schools-eight_schools_noncentered,garch-garch11 --seeds 1-12 "
        '--samplers "NUTS,NUTS dense,RNSHMC,RNSHMC before"',
        "as economy_poor_fit_refit_others, 12 seeds; the rule was written looking at the "
        "Student-t and eight schools",
    ),
)
"""Result files, the command behind each (its section in the page gives every option) and what
to know about its baselines. A workload (and width) in a later file replaces its rows from
earlier ones."""
BASELINES = ("NUTS", "NUTS dense", "nutpie", "nutpie low-rank")
KINDS = ("bulk", "tail")
SURROGATE = "RNSHMC"


@dataclass(frozen=True)
class Run:
    """One run of one sampler, as both kinds of result file give it."""

    workload: str
    d: int | None
    sampler: str
    seed: int
    seconds: float
    bulk: float
    tail: float
    logps: float

    def per_second(self, kind: str) -> float:
        return getattr(self, kind) / self.seconds

    @property
    def least(self) -> float:
        return min(self.bulk, self.tail) / self.seconds


def workload_of(row: dict) -> str:
    """A ``benchmarks.wide_models`` row's workload (rows from before ``--workload``: logistic)."""
    return row.get("workload", "logistic")


def wide_runs(results: dict) -> list[Run]:
    """Runs of a ``benchmarks.wide_models`` file (ESS there is per kept draw)."""
    draws = results["draws"]
    runs = []
    for row in results["runs"]:
        moved = row.get("accept", 1.0) != 0.0
        runs.append(
            Run(
                workload=workload_of(row),
                d=row["d"],
                sampler=row["sampler"],
                seed=row["seed"],
                seconds=row["whole call s"],
                bulk=row["bulk ESS / draw"] * draws if moved else 0.0,
                tail=row["tail ESS / draw"] * draws if moved else 0.0,
                logps=row["logps to ESS 1000"] if moved else np.inf,
            )
        )
    return runs


def economy_runs(results: dict) -> list[Run]:
    """Runs of a ``benchmarks.economy`` file."""
    return [
        Run(
            workload=row["workload"],
            d=None,
            sampler=row["sampler"],
            seed=row["seed"],
            seconds=row["call s"],
            bulk=row["bulk ESS"],
            tail=row["tail ESS"],
            logps=row["logps to ESS 1000"],
        )
        for workload in results["workloads"].values()
        for row in workload["runs"]
    ]


def load(name: str) -> tuple[list[Run], str]:
    """A result file's runs and its date."""
    results = json.loads((RESULTS / f"{name}.json").read_text())
    if "workloads" in results:
        return economy_runs(results), results["meta"]["date"]
    return wide_runs(results), results["date"]


def _ratio(value: float) -> str:
    if not np.isfinite(value):
        return "inf"
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def _spread(values: list[float]) -> str:
    middle = f"{_ratio(np.median(values))}x"
    if len(values) == 1:
        return middle
    return f"{middle} ({_ratio(min(values))}-{_ratio(max(values))})"


def _over(ours: float, theirs: float) -> float:
    """``ours / theirs``, infinite where the baseline had no effective draws."""
    return ours / theirs if theirs > 0 else np.inf


def _count(value: float) -> str:
    if not np.isfinite(value):
        return "-"
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value / 1e3:.3g}k"


@dataclass(frozen=True)
class Comparison:
    """RNSHMC's run of one seed against the baselines of that seed."""

    seed: int
    ours: Run
    best: Run
    """The baseline with the most min(bulk, tail) ESS per second."""
    ratios: dict[str, float]
    """``"bulk"``/``"tail"``: ours per second over the most of any baseline in that measure."""
    strongest: tuple[str, ...]
    """The baselines those maxima came from."""


def comparisons(runs: list[Run]) -> list[Comparison]:
    """Per seed of ``runs`` (one workload and width) with RNSHMC and a baseline: the comparison."""
    found = []
    for seed in sorted({r.seed for r in runs}):
        ours = [r for r in runs if r.seed == seed and r.sampler == SURROGATE]
        theirs = [r for r in runs if r.seed == seed and r.sampler in BASELINES]
        if not ours or not theirs:
            continue
        strongest = {
            kind: max(theirs, key=lambda r, kind=kind: r.per_second(kind)) for kind in KINDS
        }
        found.append(
            Comparison(
                seed,
                ours[0],
                max(theirs, key=lambda r: r.least),
                {k: _over(ours[0].per_second(k), r.per_second(k)) for k, r in strongest.items()},
                tuple(r.sampler for r in strongest.values()),
            )
        )
    return found


def rows_of(runs: list[Run]) -> list[list[str]]:
    """One row per workload and width with a surrogate run and a baseline run of its seeds."""
    rows = []
    for workload, d in dict.fromkeys((r.workload, r.d) for r in runs):
        found = comparisons([r for r in runs if (r.workload, r.d) == (workload, d)])
        if not found:
            continue
        ours, best = [c.ours for c in found], [c.best for c in found]
        ratios = {kind: [c.ratios[kind] for c in found] for kind in KINDS}
        baselines = [name for c in found for name in c.strongest]
        rows.append(
            [
                workload,
                "-" if d is None else str(d),
                ", ".join(sorted(set(baselines))),
                f"{np.median([r.seconds for r in ours]):.3g} / "
                f"{np.median([r.seconds for r in best]):.3g}",
                _spread(ratios["bulk"]),
                _spread(ratios["tail"]),
                f"{_count(np.median([r.logps for r in ours]))} / "
                f"{_count(np.median([r.logps for r in best]))}",
                str(len(found)),
            ]
        )
    return rows


HEADER = (
    "workload",
    "d",
    "strongest baseline",
    "whole call s: RNSHMC / baseline",
    "bulk ESS/s vs baseline",
    "tail ESS/s vs baseline",
    "exact logps to ESS 1000: RNSHMC / baseline",
    "seeds",
    "source",
)


def newest_runs(names: list[str]) -> list[tuple[str, str, list[Run]]]:
    """Each result file's name, date and runs, less the workloads (and widths) a later one has."""
    loaded = [(name, *load(name)) for name in names]
    kept = []
    for index, (name, runs, date) in enumerate(loaded):
        later_runs = (run for _, runs_of_file, _ in loaded[index + 1 :] for run in runs_of_file)
        newer = {(run.workload, run.d) for run in later_runs}
        kept.append((name, date, [run for run in runs if (run.workload, run.d) not in newer]))
    return kept


def table() -> str:
    """The markdown table, one row per workload and width, with its source and date."""
    rows = []
    for name, date, runs in newest_runs([name for name, _, _ in SOURCES]):
        rows += [[*row, f"`{name}` ({date})"] for row in rows_of(runs)]
    commands = [
        f"- `{name}`: `{command}`" + (f" ({note})" if note else "")
        for name, command, note in SOURCES
    ]
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in _by_workload_and_width(rows)]
    return "\n".join([*lines, "", *commands]) + "\n"


def _by_workload_and_width(rows: list[list[str]]) -> list[list[str]]:
    """Rows of a workload together (in order of its first row), each workload's by width."""
    first = {}
    for row in rows:
        first.setdefault(row[0], len(first))
    return sorted(rows, key=lambda row: (first[row[0]], int(row[1]) if row[1].isdigit() else 0))


def block() -> str:
    """The table between the page's markers."""
    return f"{START}\n{table()}{END}"


def write(pages: tuple[Path, ...] = PAGES) -> None:
    """Replace the table between the markers of every page."""
    for page in pages:
        text = page.read_text()
        before, rest = text.split(START, 1)
        _, after = rest.split(END, 1)
        page.write_text(before + block() + after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the table in the pages")
    args = parser.parse_args()
    if args.write:
        write()
    else:
        print(table())


if __name__ == "__main__":
    main()
