"""The examples run end to end at tiny sizes, so they cannot rot.

The two slowest are marked ``slow`` (``scripts/run-tests -m slow``): what they show is tested in
the default suite by smaller runs.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str, *arguments: str) -> subprocess.CompletedProcess:
    """Run ``examples/<name>`` with ``arguments``; fail with its stderr if it fails."""
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *arguments],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def test_logistic_regression_example_compares_nuts_rnshmc_and_arnshmc(tmp_path):
    completed = run_example(
        "logistic_regression.py",
        "--n-obs=400",
        "--dim=4",
        "--tune=300",
        "--draws=150",
        "--chains=1",
        "--no-nutpie",
        f"--figures={tmp_path}",
    )
    assert "RNSHMC / NUTS bulk ESS per second" in completed.stdout
    assert "ARNSHMC / NUTS bulk ESS per second" in completed.stdout
    for name in ("RNSHMC", "ARNSHMC"):
        assert_evaluations_per_draw(name, completed)
    assert (tmp_path / "ess_per_second.png").stat().st_size > 0
    assert (tmp_path / "error_vs_time.png").stat().st_size > 0


def test_elliptic_pde_example_compares_nuts_and_rnshmc():
    completed = run_example(
        "elliptic_pde.py", "--n-cells=6", "--n-modes=3", "--tune=300", "--draws=100", "--chains=1"
    )
    assert "seconds per solve" in completed.stdout
    assert "RNSHMC / NUTS bulk ESS per second of draws" in completed.stdout
    assert_evaluations_per_draw("RNSHMC", completed)


def assert_evaluations_per_draw(name: str, completed) -> None:
    """The evaluations per kept draw of ``name``'s row fit what the example's log says it did.

    The examples run the samplers' defaults, whose check of whether the surrogate pays weighs
    measured seconds: on these small, cheap models it may give the surrogate up.
    """
    line = next(line for line in completed.stdout.splitlines() if line.startswith(f"{name} "))
    cells = line.split()
    # compare_samplers' columns 11 and 12: logp and gradient evaluations per draw after tuning
    logps, gradients = float(cells[11]), float(cells[12])
    if re.search(rf"\b{name} continues with exact NUTS", completed.stdout + completed.stderr):
        # NUTS draws, a logp with each gradient (ARNSHMC on PyMC 5 in the logistic example,
        # whose online updates are slow)
        assert logps == gradients > 1.0
    else:
        # one logp per surrogate draw and a NUTS trajectory per net draw (a tenth)
        assert 1.0 < logps < 4.0 and 0.0 < gradients < 3.0


# 27-30 s: models without gradients are sampled in tests/step_methods (black-box cases)
@pytest.mark.slow
def test_black_box_ode_example_compares_demetropolisz_and_rnshmc():
    completed = run_example("black_box_ode.py", "--tune=300", "--draws=200", "--chains=1")
    assert "RNSHMC / DEMetropolisZ bulk ESS per second" in completed.stdout
    cells = next(line for line in completed.stdout.splitlines() if line.startswith("RNSHMC "))
    assert float(cells.split()[11]) == 1.0  # one ODE solve per draw after tuning
    assert "RNSHMC's failed or abandoned solves after tuning (model_failures): " in completed.stdout


# 30-42 s: a served model against the same model in process is tests/served/test_umbridge.py
@pytest.mark.slow
def test_umbridge_example_samples_a_served_pde_as_the_same_model_in_process():
    completed = run_example(
        "umbridge_pde.py", "--n-cells=6", "--n-modes=2", "--tune=150", "--draws=50"
    )
    assert "served over UM-Bridge: whole call" in completed.stdout
    gap = completed.stdout.split("largest gap between the posterior means: ")[1].split()[0]
    assert float(gap) < 4.5, "the served model's posterior is the in-process model's"
