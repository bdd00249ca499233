"""The results table of docs/benchmarks.md: what benchmarks/results_table.py makes of the files."""

import json

import numpy as np

from benchmarks import results_table
from benchmarks.results_table import Run, rows_of, wide_runs


def test_the_pages_hold_the_table_the_result_files_give():
    for page in results_table.PAGES:
        assert results_table.block() in page.read_text(), page.name


def _run(sampler, seed, seconds, bulk, tail):
    return Run("w", 3, sampler, seed, seconds, bulk, tail, 1000.0 * seconds)


def test_bulk_and_tail_are_each_compared_with_the_strongest_baseline_in_them():
    runs = [
        _run("RNSHMC", 1, 1.0, 400.0, 200.0),
        _run("NUTS", 1, 2.0, 400.0, 400.0),  # bulk 200 a second, tail 200: the tail's strongest
        _run("nutpie", 1, 1.0, 1000.0, 100.0),  # bulk 1000 a second: the bulk's strongest
        _run("RNSHMC", 2, 1.0, 300.0, 300.0),
        _run("nutpie", 2, 1.0, 100.0, 0.0),  # no tail ESS: the tail ratio is infinite
    ]
    (row,) = rows_of(runs)
    assert row[2] == "NUTS, nutpie"
    # bulk: 400 / 1000 = 0.4 and 300 / 100 = 3; tail: 200 / 200 = 1 and inf
    assert row[4] == "1.7x (0.4-3)" and row[5] == "infx (1-inf)"
    assert row[3] == "1 / 1.5"  # whole calls: RNSHMC's and the min(bulk, tail) strongest's
    assert row[-1] == "2"


def test_a_baseline_that_never_moved_has_no_effective_draws():
    results = {
        "draws": 1000,
        "runs": [
            {
                "d": 4,
                "sampler": s,
                "seed": 1,
                "whole call s": 1.0,
                "bulk ESS / draw": 1.0,
                "tail ESS / draw": 1.0,
                "logps to ESS 1000": 2000.0,
                "accept": a,
            }
            for s, a in (("RNSHMC", 0.9), ("nutpie low-rank", 0.0))
        ],
    }
    stuck = wide_runs(json.loads(json.dumps(results)))[1]
    assert stuck.bulk == 0.0 and stuck.tail == 0.0 and not np.isfinite(stuck.logps)


def test_a_later_file_replaces_the_rows_of_its_workloads_and_widths(monkeypatch):
    def runs(workload, d, seconds):
        return [
            Run(workload, d, "RNSHMC", 1, seconds, 100.0, 100.0, 10.0),
            Run(workload, d, "NUTS", 1, 1.0, 100.0, 100.0, 10.0),
        ]

    files = {
        "old": runs("a", 3, 2.0) + runs("a", 5, 2.0) + runs("b", None, 2.0),
        "new": runs("a", 3, 4.0),
    }
    monkeypatch.setattr(results_table, "SOURCES", (("old", "x", ""), ("new", "y", "")))
    monkeypatch.setattr(results_table, "load", lambda name: (files[name], "today"))
    rows = [
        line
        for line in results_table.table().splitlines()
        if line.startswith("| a") or line.startswith("| b")
    ]
    assert [(row.split(" | ")[0:2], row.split(" | ")[-1]) for row in rows] == [
        (["| a", "3"], "`new` (today) |"),  # a workload's rows together, by width
        (["| a", "5"], "`old` (today) |"),
        (["| b", "-"], "`old` (today) |"),
    ]
