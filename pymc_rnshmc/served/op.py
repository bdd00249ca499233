"""A served model as a PyTensor ``Op``, so a PyMC model can use it like any other function.

``UMBridgeOp(forward)(theta)`` is the model's output vector at ``theta`` (one ``Evaluate``
request per evaluation). Its gradient is the server's ``Gradient`` (a vector-Jacobian product,
one request per input and output) when the server provides one; otherwise it has none, and the
samplers sample the model without gradients (PyMC's NUTS cannot). With one input and one
output the op takes and returns a vector; with several it takes one vector per input and
returns a list, one vector per output.

The op computes in float64, as the protocol does, whatever ``floatX`` is.
"""

from __future__ import annotations

import json

import numpy as np
import pytensor.gradient
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_rnshmc.served.client import UMBridgeModel
from pymc_rnshmc.served.python_ops import run_in_object_mode

__all__ = ["UMBridgeOp"]


def _key(model: UMBridgeModel) -> tuple:
    """What makes two clients the same: ops of clients with other limits are not merged."""
    config = json.dumps(model.config, sort_keys=True)
    return (model.url, model.name, config, model.timeout, model.connect_timeout, model.retries)


def _vectors(op: Op, inputs, sizes: tuple[int, ...]) -> list:
    if len(inputs) != len(sizes):
        raise TypeError(f"{op} takes {len(sizes)} input vector(s) (sizes {sizes}).")
    vectors = [pt.as_tensor_variable(x).astype("float64") for x in inputs]
    for vector in vectors:
        if vector.ndim != 1:
            raise TypeError(f"{op} takes vectors, got a tensor of {vector.ndim} dimensions.")
    return vectors


class UMBridgeOp(Op):
    """The outputs of a model served over UM-Bridge, with the server's gradient if it has one.

    Parameters
    ----------
    model : UMBridgeModel
        The served model (its client: URL, name, config, time limits).

    Examples
    --------
    >>> forward = UMBridgeModel("http://localhost:4242", "forward")  # doctest: +SKIP
    >>> with pm.Model():  # doctest: +SKIP
    ...     theta = pm.Normal("theta", 0, 1, shape=forward.input_sizes[0])
    ...     prediction = UMBridgeOp(forward)(theta)
    ...     pm.Normal("y", prediction, 0.1, observed=data)

    References
    ----------
    .. [1] Seelinger, L., Cheng-Seelinger, V., Davis, A., Parno, M., & Reinarz, A. (2023).
       UM-Bridge: Uncertainty quantification and modeling bridge. Journal of Open Source
       Software, 8(83), 4748.
    """

    __props__ = ("key",)

    def __init__(self, model: UMBridgeModel) -> None:
        if not isinstance(model, UMBridgeModel):
            raise TypeError(f"UMBridgeOp takes an UMBridgeModel, got {type(model).__name__}.")
        self.model = model
        self.key = _key(model)

    def make_node(self, *inputs) -> Apply:
        vectors = _vectors(self, inputs, self.model.input_sizes)
        outputs = [pt.dvector() for _ in self.model.output_sizes]
        return Apply(self, vectors, outputs)

    def perform(self, node, inputs, output_storage) -> None:
        for storage, value in zip(output_storage, self.model.evaluate(inputs), strict=True):
            storage[0] = value

    def pullback(self, inputs, outputs, output_gradients) -> list:
        if not self.model.supports_gradient:
            return [
                pytensor.gradient.grad_not_implemented(
                    self, index, x, f"the served model {self.model.name!r} has no Gradient"
                )
                for index, x in enumerate(inputs)
            ]
        sensitivities = [
            pt.zeros_like(output) if _disconnected(g) else g
            for g, output in zip(output_gradients, outputs, strict=True)
        ]
        return [
            UMBridgeVJP(self.model, index)(*inputs, *sensitivities) for index in range(len(inputs))
        ]

    L_op = pullback  # PyTensor 2 asks for L_op, PyTensor 3 for pullback

    def __str__(self) -> str:
        return f"UMBridgeOp({self.model.name!r} at {self.model.url})"


def _disconnected(gradient) -> bool:
    return isinstance(gradient.type, pytensor.gradient.DisconnectedType)


class UMBridgeVJP(Op):
    """The gradient of :class:`UMBridgeOp` in one input: ``sum_j sens_j^T J_j`` by the server."""

    __props__ = ("key", "in_wrt")

    def __init__(self, model: UMBridgeModel, in_wrt: int) -> None:
        self.model = model
        self.key = _key(model)
        self.in_wrt = int(in_wrt)

    def make_node(self, *inputs_and_sensitivities) -> Apply:
        n_inputs = len(self.model.input_sizes)
        vectors = _vectors(self, inputs_and_sensitivities[:n_inputs], self.model.input_sizes)
        sensitivities = [
            pt.as_tensor_variable(s).astype("float64") for s in inputs_and_sensitivities[n_inputs:]
        ]
        return Apply(self, vectors + sensitivities, [pt.dvector()])

    def perform(self, node, inputs, output_storage) -> None:
        n_inputs = len(self.model.input_sizes)
        parameters, sensitivities = inputs[:n_inputs], inputs[n_inputs:]
        total = np.zeros(self.model.input_sizes[self.in_wrt])
        for out_wrt, sens in enumerate(sensitivities):
            if np.any(sens):
                total += self.model.gradient(out_wrt, self.in_wrt, parameters, sens)
        output_storage[0][0] = total


run_in_object_mode(UMBridgeOp, UMBridgeVJP)
