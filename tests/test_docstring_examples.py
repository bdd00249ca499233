"""Every public class and function has a numpydoc ``Examples`` section, and its examples run.

The public names are those of ``pymc_rnshmc.__all__`` and ``pymc_rnshmc.surrogates.__all__``
(``__version__`` is neither). Each docstring's examples run with :mod:`doctest` in a namespace
of their own, so they import what they use, as a reader copying them would; a ``+SKIP``
directive does not count as an example that runs. Methods' docstrings are not collected.
"""

import doctest
import inspect
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

import pymc_rnshmc
import pymc_rnshmc.surrogates

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
EXAMPLES_HEADING = re.compile(r"^Examples\n-{8,}$", re.MULTILINE)


def public_objects() -> dict[str, object]:
    """The public classes and functions by name (one entry for a name both lists export)."""
    objects: dict[str, object] = {}
    for module in (pymc_rnshmc, pymc_rnshmc.surrogates):
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if objects.get(name, obj) is not obj:  # two different objects of one name
                name = f"{module.__name__}.{name}"
            objects[name] = obj
    return objects


PUBLIC = public_objects()


@pytest.fixture(autouse=True)
def no_open_figures():
    yield
    plt.close("all")


def test_both_lists_are_collected():
    assert {"RNSHMC", "compare_samplers", "CoarseCorrectedSurrogate", "HeldOutErrors"} <= set(
        PUBLIC
    )


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_the_docstring_examples_run(name):
    obj = PUBLIC[name]
    docstring = inspect.getdoc(obj) or ""
    assert EXAMPLES_HEADING.search(docstring), f"{name}'s docstring has no Examples section"
    (test,) = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert test.examples, f"{name}'s Examples section has no >>> example"
    skipped = [example.source for example in test.examples if example.options.get(doctest.SKIP)]
    assert not skipped, f"{name}'s examples skip {skipped}: examples must run"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
