"""The example notebooks run end to end at toy sizes, so they cannot rot.

Each notebook in ``examples/notebooks`` is executed with ``PYMC_RNSHMC_NOTEBOOK_SMOKE=1`` (its
``parameters`` cell then switches to toy sizes) in a fresh ``python3`` kernel run by this
interpreter. A cell appended to the in-memory copy (the file is not modified) prints the
notebook's comparison tables as JSON, with the fraction of draws that followed the surrogate;
the tests check those numbers and that the tables and plots were displayed.
"""

import json
import math
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from traitlets import default

NOTEBOOKS = Path(__file__).resolve().parent.parent / "examples" / "notebooks"
NOTEBOOK_SECONDS = 300  # for the whole notebook, kernel start included
MARKER = "NOTEBOOK-TEST-REPORT:"
NETWORK, GRID = "network", "grid"

# notebook -> comparison table variable -> (results variable, {sampler: kind})
EXPECTED = {
    "logistic_regression": {
        "comparison": ("results", {"NUTS": None, "RNSHMC": NETWORK, "ARNSHMC": NETWORK}),
    },
    "banana": {
        "comparison": (
            "results",
            {"NUTS": None, "SparseGridHMC": GRID, "SparseGridHMC full": GRID, "RNSHMC": NETWORK},
        ),
    },
    "gaussian_process": {
        "comparison": ("results", {"NUTS": None, "SparseGridHMC": GRID}),
    },
    "elliptic_pde": {
        "comparison": ("results", {"NUTS": None, "RNSHMC": NETWORK, "ARNSHMC": NETWORK}),
        "sparse_grid_comparison": ("sparse_grid_results", {"NUTS": None, "SparseGridHMC": GRID}),
    },
}


class NativeKernelManager(AsyncKernelManager):
    """Kernel manager that knows only ipykernel's built-in ``python3`` kernelspec.

    Kernelspecs installed in user or system Jupyter directories are ignored: a user-level
    ``python3`` spec may run another Python, without this package. ipykernel's built-in spec
    (the one ``KernelSpecManager`` falls back on for ``python3``) runs ``sys.executable``.
    """

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return KernelSpecManager(kernel_dirs=[])


def report_cell(tables: dict) -> str:
    """Source of a cell printing the comparison tables and per-sampler draw statistics."""
    pairs = ", ".join(f"{table!r}: ({table}, {runs})" for table, (runs, _) in tables.items())
    return f"""\
import json
import sys

report = {{"executable": sys.executable, "tables": {{}}}}
for table_name, (table, runs) in {{{pairs}}}.items():
    rows = json.loads(table.to_json(orient="index"))
    for name, idata in runs.items():
        stats = as_dataset(idata, "sample_stats")
        for stat in ("used_surrogate", "steps_outside_domain"):
            if stat in stats:
                rows[name][stat] = float(stats[stat].mean())
    report["tables"][table_name] = rows
print({MARKER!r} + json.dumps(report))
"""


def execute(name: str, tables: dict) -> tuple[nbformat.NotebookNode, dict]:
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(report_cell(tables)))
    deadline = time.monotonic() + NOTEBOOK_SECONDS
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=NativeKernelManager,
        # A deadline for the whole notebook: each cell gets the time that is left.
        timeout_func=lambda cell: max(1, math.ceil(deadline - time.monotonic())),
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    printed = "".join(
        output.get("text", "")
        for output in notebook.cells[-1].outputs
        if output.output_type == "stream"
    )
    line = next(line for line in printed.splitlines() if line.startswith(MARKER))
    return notebook, json.loads(line[len(MARKER) :])


def displayed(notebook: nbformat.NotebookNode) -> tuple[list[str], int]:
    """The text of every cell result, and the number of images displayed."""
    texts, images = [], 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            images += "image/png" in data
            if output.output_type == "execute_result":
                texts.append(data.get("text/plain", ""))
    return texts, images


@pytest.fixture(autouse=True)
def smoke_environment(monkeypatch):
    monkeypatch.setenv("PYMC_RNSHMC_NOTEBOOK_SMOKE", "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernel's debugger warning


def test_notebooks_are_stored_run_top_to_bottom_with_a_parameters_cell():
    # stored with the outputs of one full-size run, in order, as PyMC's gallery stores them
    # (the site renders them; they are never executed there), and without progress bars
    assert sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert notebook.metadata.kernelspec.name == "python3"
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert "parameters" in code[0].metadata.get("tags", []), path.name
        assert "PYMC_RNSHMC_NOTEBOOK_SMOKE" in code[0].source, path.name
        assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
        outputs = [output for cell in code for output in cell.outputs]
        assert any("image/png" in output.get("data", {}) for output in outputs), path.name
        assert not any(output.get("name") == "stderr" for output in outputs), path.name
        for cell in code:
            assert "step=" in cell.source or "pm.sample(" not in cell.source, path.name


def test_the_kernel_is_ipykernels_own_spec_run_by_this_interpreter():
    manager = NativeKernelManager(kernel_name="python3")
    assert manager.kernel_spec.argv[0] == sys.executable
    assert manager.kernel_spec.argv[1:3] == ["-m", "ipykernel_launcher"]


@pytest.mark.parametrize(
    "name",
    [
        # 17 s; examples/elliptic_pde.py runs the same comparison in the default suite
        pytest.param(name, marks=pytest.mark.slow) if name == "elliptic_pde" else name
        for name in sorted(EXPECTED)
    ],
)
def test_notebook_runs_and_compares_the_samplers(name):
    tables = EXPECTED[name]
    notebook, report = execute(name, tables)
    assert report["executable"] == sys.executable

    texts, images = displayed(notebook)
    shown_tables = [text for text in texts if "max |dmean|/MCSE" in text]
    assert len(shown_tables) == len(tables)  # each comparison table was displayed
    samplers = [sampler for _, kinds in tables.values() for sampler in kinds]
    assert images >= 2 * len(samplers)  # a trace plot and a pair plot per run
    assert sum("mean" in text and "ess_bulk" in text for text in texts) == len(tables)  # az.summary

    for table_name, (_, kinds) in tables.items():
        rows = report["tables"][table_name]
        assert set(rows) == set(kinds), table_name
        nuts = rows["NUTS"]
        assert nuts["max |dmean|/MCSE"] is None  # the reference
        assert nuts["grad/draw"] >= 1 and nuts["logp/draw"] == nuts["grad/draw"]
        for sampler, kind in kinds.items():
            row = rows[sampler]
            assert 0 < row["min bulk ESS"] < math.inf, (table_name, sampler)
            assert 0 < row["ESS/s"] < math.inf and row["wall s"] >= row["sampling s"] > 0
            assert 0 <= row["accept"] <= 1, (table_name, sampler)
            if kind is None:
                continue
            # Nine in ten draws after tuning followed the surrogate (the rest: the safety net).
            assert row["used_surrogate"] >= 0.8, (table_name, sampler)
            # Loose: catches a sampler on the wrong posterior, not smoke-size Monte Carlo noise.
            assert row["max |dmean|/MCSE"] < 8, (table_name, sampler, row)
            # A surrogate draw costs one logp more than its exact gradients (none for a network,
            # one per leapfrog step outside a grid's box); a net draw's NUTS trajectory as many
            # logps as gradients: the difference per draw is the surrogate's share.
            assert row["logp/draw"] - row["grad/draw"] == pytest.approx(
                row["used_surrogate"], abs=1e-9
            ), (table_name, sampler, kind)
