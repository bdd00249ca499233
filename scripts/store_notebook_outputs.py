"""Run the example notebooks at full size and store them with their outputs.

    python scripts/store_notebook_outputs.py                  # all four (about 8 minutes)
    python scripts/store_notebook_outputs.py banana           # one

The documentation site renders the notebooks with the outputs stored in them, as PyMC's example
gallery does, and never executes them; ``tests/test_notebooks.py`` still runs each at toy sizes.
Each notebook runs top to bottom in a fresh kernel of this interpreter (one BLAS thread; run it
on an otherwise idle machine, since the tables show timings). Progress bars are dropped from the
stored outputs: what rich draws into a notebook is a stream of intermediate frames, and a
warning that ipywidgets is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "examples" / "notebooks"
RICH_FRAME = '<pre style="white-space:pre;overflow-x:auto;line-height:normal'
"""How rich's Jupyter renderer starts each progress-bar frame."""


def is_progress(output) -> bool:
    """A progress-bar frame, or the stderr stream the samplers log to."""
    if output.get("output_type") == "stream":
        return output.get("name") == "stderr"
    html = "".join(output.get("data", {}).get("text/html", ""))
    return output.get("output_type") == "display_data" and html.startswith(RICH_FRAME)


def store(name: str) -> float:
    """Execute ``name``.ipynb at full size and write it back with its outputs; seconds taken."""
    sys.path.insert(0, str(ROOT))
    from tests.test_notebooks import NativeKernelManager  # ipykernel's spec: this interpreter

    path = NOTEBOOKS / f"{name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        notebook,
        timeout=None,
        kernel_manager_class=NativeKernelManager,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    ).execute()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = [output for output in cell.outputs if not is_progress(output)]
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)
    return time.perf_counter() - start


def main() -> None:
    names = sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help=f"default all: {', '.join(names)}")
    args = parser.parse_args()
    unknown = set(args.notebooks) - set(names)
    if unknown:
        parser.error(f"no such notebook: {', '.join(sorted(unknown))}")
    os.environ.pop("PYMC_RNSHMC_NOTEBOOK_SMOKE", None)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for name in args.notebooks or names:
        print(f"{name}: {store(name):.0f} s", flush=True)


if __name__ == "__main__":
    main()
