"""The documentation site builds with warnings as errors, and its pages have their content.

The notebooks are rendered with the outputs stored in them (never executed here), so this takes
seconds; ``tests/test_notebooks.py`` runs them at toy sizes.
"""

import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    output = tmp_path_factory.mktemp("site")
    doctrees = tmp_path_factory.mktemp("doctrees")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    completed = subprocess.run(
        [*command, "-d", str(doctrees), str(DOCS), str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return output


def test_the_landing_page_links_every_section(site):
    index = (site / "index.html").read_text()
    pages = ("choosing", "getting-started", "coarse-model", "reliability", "architecture")
    pages += ("benchmarks", "api")
    for page in (*pages, "notebooks/banana"):
        assert f'href="{page}.html"' in index, page
    assert "compare_samplers" in index
    assert "logistic-regression-ess-per-second.png" in index  # the landing figure


def test_the_api_reference_comes_from_the_docstrings(site):
    page = (site / "generated" / "pymc_rnshmc.RNSRMHMC.html").read_text()
    assert "Random network surrogate Riemannian manifold HMC" in page
    assert "Parameters" in page and "References" in page and "softabs_alpha" in page
    assert (site / "generated" / "pymc_rnshmc.compare_samplers.html").exists()


def test_a_notebook_page_shows_its_code(site):
    page = (site / "notebooks" / "banana.html").read_text()
    assert page.count('class="cell_input') >= 5  # the notebook's code cells
    assert "SparseGridHMC" in page


@pytest.mark.parametrize(
    "notebook", ["logistic_regression", "elliptic_pde", "banana", "gaussian_process"]
)
def test_every_notebook_page_shows_its_stored_outputs(site, notebook):
    page = (site / "notebooks" / f"{notebook}.html").read_text()
    outputs = page.split('class="cell_output')[1:]
    assert sum(output.count("<img") for output in outputs) >= 2, "no stored figures"
    assert sum(output.count("<table") for output in outputs) >= 1, "no stored tables"


@pytest.mark.parametrize("section", ["The kernel", "The warm-up"])
def test_the_architecture_examples_run_without_pm_sample(section):
    page = (DOCS / "architecture.md").read_text()
    text = page.split(f"### {section} without `pm.sample`")[1]
    code = text.split("```python")[1].split("```")[0]
    exec(compile(code, "architecture.md", "exec"), {})


def test_the_version_is_the_changelogs_latest_release():
    import re
    import tomllib

    import pymc_rnshmc

    root = DOCS.parent
    changelog = (root / "CHANGELOG.md").read_text()
    latest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.MULTILINE).group(1)
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["version"] == pymc_rnshmc.__version__ == latest
