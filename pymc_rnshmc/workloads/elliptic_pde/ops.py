"""The elliptic PDE inverse problem as a PyMC model, with an adjoint gradient.

:class:`EllipticPDEObservations` is a PyTensor ``Op`` mapping the Karhunen-Loeve weights
``theta`` to the predicted observations; its gradient is a second ``Op``,
:class:`EllipticPDEVectorJacobianProduct`, that returns ``J(theta)^T cotangent`` from one adjoint
solve (not ``d`` finite differences). Both share one
:class:`~pymc_rnshmc.elliptic_pde.EllipticPDEForwardModel`, which keeps the factorization of the
last ``theta``: the joint ``logp``-and-gradient function that NUTS calls factorizes once.

Both Ops are implemented in Python (``perform``). PyTensor 2's C linker calls
``perform`` directly. PyTensor 3's default Numba linker runs it in Numba's object mode: that is
its generic fallback for Python Ops, registered here for these two ``Op`` types through
``numba_funcify`` (PyTensor's extension point) only to skip the fallback's warning. The gradient
is defined as ``pullback`` (PyTensor 3) and ``L_op`` (PyTensor 2). The Ops pickle with
their forward model (without its cache), so ``pm.sample(cores=2)`` can use worker processes.

``elliptic_pde(gradient=False)`` builds the same model as a black box: its observations Op
raises ``NotImplementedError`` when differentiated, for benchmarking gradient-free samplers.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pymc_rnshmc.served.python_ops import run_in_object_mode
from pymc_rnshmc.workloads.elliptic_pde.forward_model import (
    EllipticPDEForwardModel,
    KarhunenLoeveExpansion,
    synthetic_data,
)

__all__ = [
    "EllipticPDEObservations",
    "EllipticPDEVectorJacobianProduct",
    "elliptic_pde",
    "sparse_grid_elliptic_pde",
]


def _float_vector(variable, length: int) -> pt.TensorVariable:
    variable = pt.as_tensor_variable(variable)
    if variable.ndim != 1 or variable.type.shape[0] not in (None, length):
        raise TypeError(f"expected a vector of length {length}, got {variable.type}")
    return pt.cast(variable, "float64") if variable.dtype != "float64" else variable


def _output_vector(length: int) -> pt.TensorVariable:
    return pt.tensor(dtype="float64", shape=(length,))


class EllipticPDEVectorJacobianProduct(Op):
    """``(theta, cotangent) -> J(theta)^T cotangent`` of the PDE observations, by an adjoint solve.

    Parameters
    ----------
    forward_model : EllipticPDEForwardModel
        The discretized forward model (shared with :class:`EllipticPDEObservations`).
    """

    __props__ = ("forward_model",)

    def __init__(self, forward_model: EllipticPDEForwardModel) -> None:
        self.forward_model = forward_model

    def make_node(self, theta, cotangent) -> Apply:
        n_modes, n_observations = self.forward_model.n_modes, self.forward_model.n_observations
        inputs = [_float_vector(theta, n_modes), _float_vector(cotangent, n_observations)]
        return Apply(self, inputs, [_output_vector(n_modes)])

    def perform(self, node, inputs, output_storage) -> None:
        theta, cotangent = inputs
        output_storage[0][0] = self.forward_model.vector_jacobian_product(theta, cotangent)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(self.forward_model.n_modes,)]


class EllipticPDEObservations(Op):
    """``theta -> u(x_j, theta)``: the PDE solution at the observation points.

    Parameters
    ----------
    forward_model : EllipticPDEForwardModel
        The discretized forward model.
    gradient : bool
        Whether the Op has its adjoint gradient; without it, differentiating raises
        ``NotImplementedError`` (a black-box model).

    Notes
    -----
    The gradient is :class:`EllipticPDEVectorJacobianProduct` applied to the output gradient:
    one extra solve with the cached factorization when evaluated at the ``theta`` of the value.

    References
    ----------
    .. [1] Zhang, Shahbaba & Zhao (2017), Statistics and Computing 27(6), section 5.2.
    .. [2] Dashti & Stuart (2011), SIAM Journal on Numerical Analysis 49(6), 2524-2542.
    """

    __props__ = ("forward_model", "gradient")

    def __init__(self, forward_model: EllipticPDEForwardModel, gradient: bool = True) -> None:
        self.forward_model = forward_model
        self.gradient = gradient

    def make_node(self, theta) -> Apply:
        theta = _float_vector(theta, self.forward_model.n_modes)
        return Apply(self, [theta], [_output_vector(self.forward_model.n_observations)])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = self.forward_model.observe(inputs[0])

    def infer_shape(self, fgraph, node, input_shapes):
        return [(self.forward_model.n_observations,)]

    def pullback(self, inputs, outputs, cotangents):
        if not self.gradient:
            raise NotImplementedError("EllipticPDEObservations built with gradient=False")
        vector_jacobian_product = EllipticPDEVectorJacobianProduct(self.forward_model)
        return [vector_jacobian_product(inputs[0], cotangents[0])]

    L_op = pullback  # PyTensor 2 asks for L_op, PyTensor 3 for pullback


run_in_object_mode(EllipticPDEObservations, EllipticPDEVectorJacobianProduct)


def elliptic_pde(
    n_modes: int = 20,
    prior_sd: float = 0.5,
    n_cells: int = 30,
    data_cells: int = 50,
    noise_sd: float = 0.1,
    seed: int = 2017,
    gradient: bool = True,
) -> pm.Model:
    """The elliptic PDE inverse problem of the RNS-HMC paper as a PyMC model.

    ``theta ~ N(0, prior_sd^2 I_d)`` and ``y ~ N(u(x_j, theta), noise_sd^2)`` at the 121 points
    of an 11 x 11 grid, with ``u`` solved on an ``n_cells x n_cells`` mesh. The data are
    simulated from a ``theta`` drawn from the prior and solved on a finer ``data_cells`` mesh
    (:func:`~pymc_rnshmc.elliptic_pde.synthetic_data`). The defaults are the RNS-HMC setting
    (d = 20, prior sd 0.5, 30 x 30 mesh); :func:`sparse_grid_elliptic_pde` gives the sparse-grid
    HMC one.

    Parameters
    ----------
    n_modes : int
        Karhunen-Loeve modes ``d``, the dimension of ``theta``.
    prior_sd : float
        Prior standard deviation of each weight.
    n_cells : int
        Cells per side of the inference mesh.
    data_cells : int
        Cells per side of the mesh that generates the data.
    noise_sd : float
        Observation noise standard deviation (known).
    seed : int
        Seed of the true weights and the noise.
    gradient : bool
        Whether the model has the adjoint gradient; ``False`` gives a black-box model (same
        logp, differentiating it raises ``NotImplementedError``).

    Returns
    -------
    pymc.Model
        Free variable ``theta`` (shape ``(n_modes,)``), observed ``y`` (121 values).

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Hamiltonian Monte Carlo acceleration
       using surrogate functions with random bases. Statistics and Computing, 27(6), 1473-1490.
    .. [2] Dashti, M., & Stuart, A. M. (2011). Uncertainty quantification and weak
       approximation of an elliptic inverse problem. SIAM J. Numer. Anal., 49(6), 2524-2542.
    """
    expansion = KarhunenLoeveExpansion(n_modes)
    data = synthetic_data(n_modes, prior_sd, data_cells, noise_sd, seed, expansion=expansion)
    forward_model = EllipticPDEForwardModel(n_cells, expansion=expansion)
    observe = EllipticPDEObservations(forward_model, gradient)
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, prior_sd, shape=n_modes)
        pm.Normal("y", mu=observe(theta), sigma=noise_sd, observed=np.asarray(data.observations))
    return model


def sparse_grid_elliptic_pde(
    n_cells: int = 30,
    data_cells: int = 50,
    noise_sd: float = 0.1,
    seed: int = 2017,
    gradient: bool = True,
) -> pm.Model:
    """The sparse-grid HMC paper's setting: d = 5 weights with N(0, 1) priors.

    Data from a 51 x 51-node mesh (``data_cells=50``) as in the paper; the paper does not give
    the inference mesh, the 30 x 30 one of the RNS-HMC paper is the default.

    References
    ----------
    .. [1] Zhang, C., Shahbaba, B., & Zhao, H. (2017). Precomputing strategy for Hamiltonian
       Monte Carlo method based on regularity in parameter space. Computational Statistics,
       32(1), section 4.4.
    """
    return elliptic_pde(5, 1.0, n_cells, data_cells, noise_sd, seed, gradient)
