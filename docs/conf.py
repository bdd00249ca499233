"""Sphinx configuration of the documentation site.

    scripts/build-docs        # a fresh environment with the docs extra, then the build below
    python -m sphinx -W -b html docs docs/_build/html

The Markdown pages are MyST, the notebooks (``docs/notebooks`` links to ``examples/notebooks``)
are rendered with the outputs stored in them and never executed here, and the API reference is
generated from the numpydoc docstrings.
"""

project = "pymc-rnshmc"
author = "pymc-rnshmc developers"
copyright = "2026, pymc-rnshmc developers"
extensions = [
    "myst_nb",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
]
html_theme = "pydata_sphinx_theme"
html_title = "pymc-rnshmc"
html_theme_options = {"github_url": None, "show_toc_level": 2}
# top-level pages and notebooks have no section to navigate: no left column, wider tables
html_sidebars = {"*": [], "notebooks/*": []}
myst_heading_anchors = 3  # GitHub-style anchors, as the pages link to each other on GitHub
myst_enable_extensions = ["dollarmath", "amsmath"]  # the notebooks' $...$ math
templates_path = ["_templates"]  # class pages: the docstring, not the members PyMC passes down
nb_execution_mode = "off"  # notebooks keep the outputs of their full-size runs
numpydoc_show_class_members = False
autosummary_generate = True
exclude_patterns = ["_build", "notebooks/README.md"]
