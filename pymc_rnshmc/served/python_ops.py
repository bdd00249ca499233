"""Ops whose ``perform`` is Python code (a request to a server, a Python solver) under Numba.

PyTensor 3 compiles graphs with Numba and runs an ``Op`` that has no Numba implementation in
Numba's object mode, warning each time a graph is compiled. For an ``Op`` that calls out by
design that warning says nothing the user can act on, so :func:`run_in_object_mode` registers
the same object-mode fallback without it. PyTensor 2 links with C and needs nothing.
"""

from __future__ import annotations

import warnings

import pytensor
from pytensor.graph.op import Op

__all__ = ["run_in_object_mode"]


def run_in_object_mode(*op_types: type[Op]) -> None:
    """Run these ops' ``perform`` in Numba object mode under PyTensor 3, without the warning."""
    if int(pytensor.__version__.split(".")[0]) < 3:
        return  # PyTensor 2 links with C by default; in its opt-in Numba mode the fallback warns
    try:
        from pytensor.link.numba.dispatch.basic import generate_fallback_impl, numba_funcify
    except ImportError:  # pragma: no cover - PyTensor 3 without its Numba backend
        return

    def object_mode(op, node=None, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Numba will use object mode", UserWarning)
            return generate_fallback_impl(op, node, **kwargs)

    for op_type in op_types:
        numba_funcify.register(op_type)(object_mode)
