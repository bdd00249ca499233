"""The package's layers depend on each other in one direction only.

- ``exceptions`` and ``_checks`` are leaves;
- ``surrogates/`` (numpy) may use the leaves;
- ``hmc/`` (numpy) may use the leaves and the surrogates' whitening and quadratic;
- ``exploration/`` (numpy, the gradient-free explorer) may use the leaves;
- ``step_methods/`` is the PyMC adapter on top;
- ``served/`` (models served elsewhere, as pytensor Ops) may use the leaves;
- ``workloads/`` (the papers' models) is for examples, notebooks and benchmarks: nothing else in
  the package imports it.

Only ``step_methods/``, ``served/`` and ``workloads/`` may import PyMC or pytensor. Read from the
source (``ast``), because importing any submodule runs the package's ``__init__``, which imports
PyMC.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pymc_rnshmc"
LEAVES = {"pymc_rnshmc.exceptions", "pymc_rnshmc._checks"}
ALLOWED = {
    "exceptions": set(),
    "_checks": set(),
    "surrogates": LEAVES | {"pymc_rnshmc.surrogates"},
    "hmc": LEAVES | {"pymc_rnshmc.hmc", "pymc_rnshmc.surrogates"},
    "exploration": LEAVES | {"pymc_rnshmc.exploration"},
    "step_methods": LEAVES
    | {
        "pymc_rnshmc.hmc",
        "pymc_rnshmc.exploration",
        "pymc_rnshmc.surrogates",
        "pymc_rnshmc.step_methods",
    },
    "workloads": None,  # anything
    # the user-facing comparison sits on top of the step layer
    "comparison": LEAVES | {"pymc_rnshmc.comparison", "pymc_rnshmc.step_methods"},
    "diagnostics": LEAVES,
    # models served elsewhere (UM-Bridge), as pytensor Ops
    "served": LEAVES | {"pymc_rnshmc.served"},
    "__init__": {
        "pymc_rnshmc.step_methods",
        "pymc_rnshmc.surrogates",
        "pymc_rnshmc.exceptions",
        "pymc_rnshmc.comparison",
        "pymc_rnshmc.diagnostics",
    },
}
NUMPY_ONLY = {"exceptions", "_checks", "surrogates", "hmc", "exploration"}
FORBIDDEN_IN_NUMPY_LAYERS = ("pymc", "pytensor")


def layer_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


MODULES = sorted(PACKAGE.rglob("*.py"))


def belongs(module: str, prefixes: set[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path):
    layer = layer_of(path)
    allowed = ALLOWED[layer]
    for module in imported_modules(path):
        top = module.split(".")[0]
        if layer in NUMPY_ONLY:
            assert top not in FORBIDDEN_IN_NUMPY_LAYERS, f"{path.name} imports {module}"
        if top != "pymc_rnshmc" or allowed is None or module == "pymc_rnshmc":
            continue
        if belongs(module, {"pymc_rnshmc.workloads"}):
            pytest.fail(f"{path.name} imports {module}: nothing outside workloads/ may")
        assert belongs(module, allowed), f"{path.name} ({layer}) imports {module}"


def test_every_module_is_in_a_known_layer():
    assert {layer_of(path) for path in MODULES} <= set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_long_functions_say_what_they_do(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        # (constructors are documented by their class, as numpydoc does)
        long = isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno >= 40
        if long and node.name != "__init__":
            assert ast.get_docstring(node), f"{path.name}: {node.name} (40+ lines) has no docstring"
