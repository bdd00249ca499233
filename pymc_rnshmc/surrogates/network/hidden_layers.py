"""Random hidden layers: the fixed nonlinear bases of the random network surrogate.

Two node types from the RNS-HMC paper (section 3.2), both on whitened inputs ``z``:

* additive nodes ``a(w_k . z + beta_k)``, ``w_k ~ N(0, scale^2 I / d)``, ``beta_k ~ N(0, 1)``;
* radial nodes ``exp(-|z - c_k|^2 / (2 l_k^2))`` with centres drawn among the training points
  and random widths.

Each layer provides what a least-squares fit on values *and gradients* needs without forming the
``n d x s`` matrix of gradient rows: for every point the gradient rows are ``J_n = d phi / d z``,
and the layer returns the Gram matrix ``sum_n J_n^T J_n`` and the projection ``sum_n J_n^T h_n``
through exact identities (for additive nodes ``(S^T S) * (W W^T)`` with ``S = a'(Z W^T + beta)``).
That turns the cost of using gradients from ``O(n d s^2)`` into ``O(n s^2 + n d s)``.
"""

from __future__ import annotations

import numpy as np

from pymc_rnshmc.surrogates.network.activations import get_activation

__all__ = ["AdditiveLayer", "RadialLayer", "make_hidden_layer"]


class AdditiveLayer:
    """Additive (ridge-function) nodes ``a(w_k . z + beta_k)``.

    Parameters
    ----------
    weights : ndarray, shape (s, d)
    biases : ndarray, shape (s,)
    activation : str
        Name of a registered activation (see :mod:`pymc_rnshmc.surrogates.network.activations`).
    """

    def __init__(self, weights: np.ndarray, biases: np.ndarray, activation: str) -> None:
        self.weights = np.ascontiguousarray(weights, dtype=float)
        self.biases = np.ascontiguousarray(biases, dtype=float)
        self.activation = activation
        self._activation = get_activation(activation)

    def __getstate__(self) -> dict:
        return {"weights": self.weights, "biases": self.biases, "activation": self.activation}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    @classmethod
    def draw(
        cls,
        rng: np.random.Generator,
        n_hidden: int,
        dim: int,
        activation: str = "softplus",
        weight_scale: float = 1.0,
    ) -> AdditiveLayer:
        """Draw random weights for whitened inputs of dimension ``dim``."""
        weights = rng.normal(scale=weight_scale / np.sqrt(dim), size=(n_hidden, dim))
        biases = rng.normal(size=n_hidden)
        return cls(weights, biases, activation)

    @property
    def n_hidden(self) -> int:
        """Number of hidden units."""
        return self.weights.shape[0]

    def subset(self, n_hidden: int) -> AdditiveLayer:
        """The layer made of the first ``n_hidden`` units."""
        return AdditiveLayer(self.weights[:n_hidden], self.biases[:n_hidden], self.activation)

    def scaled(self, factor: float) -> AdditiveLayer:
        """The same units with their weights (not their biases) multiplied by ``factor``."""
        return AdditiveLayer(factor * self.weights, self.biases, self.activation)

    def _preactivation(self, whitened: np.ndarray) -> np.ndarray:
        return whitened @ self.weights.T + self.biases

    def features(self, whitened: np.ndarray) -> np.ndarray:
        """Hidden outputs ``phi`` at rows ``(n, d)`` -> ``(n, s)``, or at one point -> ``(s,)``."""
        return self._activation.value(self._preactivation(whitened))

    def gradient(self, whitened: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
        """Gradient in ``z`` of ``coefficients . phi(z)`` at one point or at rows."""
        slopes = self._activation.derivative(self._preactivation(whitened))
        return (slopes * coefficients) @ self.weights

    def gradient_gram(self, whitened: np.ndarray) -> np.ndarray:
        """``sum_n J_n^T J_n`` over the rows of ``whitened`` (shape ``(s, s)``)."""
        slopes = self._activation.derivative(self._preactivation(whitened))
        return (slopes.T @ slopes) * (self.weights @ self.weights.T)

    def gradient_projection(self, whitened: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``sum_n J_n^T h_n`` for target gradients ``h`` given as rows ``(n, d)``."""
        slopes = self._activation.derivative(self._preactivation(whitened))
        return np.einsum("nk,nk->k", slopes, targets @ self.weights.T)

    def gradient_batch(self, whitened: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
        """Gradients for several coefficient vectors: ``(n, d, m)`` for ``coefficients (s, m)``."""
        slopes = self._activation.derivative(self._preactivation(whitened))
        return _along(slopes, coefficients, self.weights)


class RadialLayer:
    """Radial basis nodes ``exp(-|z - c_k|^2 / (2 l_k^2))``.

    Parameters
    ----------
    centres : ndarray, shape (s, d)
    widths : ndarray, shape (s,)
    """

    activation = "radial"

    def __init__(self, centres: np.ndarray, widths: np.ndarray) -> None:
        self.centres = np.ascontiguousarray(centres, dtype=float)
        self.widths = np.ascontiguousarray(widths, dtype=float)
        self._inverse_squared_widths = 1.0 / self.widths**2
        self._centre_norms = np.sum(self.centres**2, axis=1)

    def __getstate__(self) -> dict:
        return {"centres": self.centres, "widths": self.widths}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    @classmethod
    def draw(
        cls,
        rng: np.random.Generator,
        n_hidden: int,
        whitened_points: np.ndarray,
        width_scale: float = 1.0,
    ) -> RadialLayer:
        """Draw centres and widths.

        Centres are jittered training points; widths are ``width_scale * sqrt(d)`` times a
        random factor, log-uniform in ``[0.5, 2]``.
        """
        n_points, dim = whitened_points.shape
        chosen = rng.integers(0, n_points, size=n_hidden)
        centres = whitened_points[chosen] + 0.1 * rng.normal(size=(n_hidden, dim))
        factors = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n_hidden))
        widths = width_scale * np.sqrt(dim) * factors
        return cls(centres, widths)

    @property
    def n_hidden(self) -> int:
        """Number of hidden units."""
        return self.centres.shape[0]

    def subset(self, n_hidden: int) -> RadialLayer:
        """The layer made of the first ``n_hidden`` units."""
        return RadialLayer(self.centres[:n_hidden], self.widths[:n_hidden])

    def _squared_distances(self, whitened: np.ndarray) -> np.ndarray:
        norms = np.sum(whitened * whitened, axis=-1)
        squared = np.expand_dims(norms, -1) - 2.0 * whitened @ self.centres.T + self._centre_norms
        return np.maximum(squared, 0.0)

    def features(self, whitened: np.ndarray) -> np.ndarray:
        """Hidden outputs ``phi`` at rows ``(n, d)`` -> ``(n, s)``, or at one point -> ``(s,)``."""
        return np.exp(-0.5 * self._squared_distances(whitened) * self._inverse_squared_widths)

    def _slopes(self, whitened: np.ndarray) -> np.ndarray:
        # d phi_k / d z = -phi_k (z - c_k) / l_k^2 = slopes_k * (c_k - z)
        return self.features(whitened) * self._inverse_squared_widths

    def gradient(self, whitened: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
        """Gradient in ``z`` of ``coefficients . phi(z)`` at one point or at rows."""
        weighted = self._slopes(whitened) * coefficients
        total = np.sum(weighted, axis=-1)
        return weighted @ self.centres - np.expand_dims(total, -1) * whitened

    def gradient_gram(self, whitened: np.ndarray) -> np.ndarray:
        """``sum_n J_n^T J_n`` over the rows of ``whitened`` (shape ``(s, s)``)."""
        slopes = self._slopes(whitened)
        inner = whitened @ self.centres.T  # z_n . c_k
        norms = np.sum(whitened * whitened, axis=1)
        # (c_k - z).(c_l - z) = c_k.c_l - z.c_k - z.c_l + |z|^2
        gram = (slopes.T @ slopes) * (self.centres @ self.centres.T)
        cross = (slopes * inner).T @ slopes
        gram -= cross + cross.T
        gram += (slopes * norms[:, None]).T @ slopes
        return gram

    def gradient_projection(self, whitened: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``sum_n J_n^T h_n`` for target gradients ``h`` given as rows ``(n, d)``."""
        slopes = self._slopes(whitened)
        along_centres = targets @ self.centres.T  # h_n . c_k
        along_points = np.sum(targets * whitened, axis=1)  # h_n . z_n
        return np.sum(slopes * (along_centres - along_points[:, None]), axis=0)

    def gradient_batch(self, whitened: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
        """Gradients for several coefficient vectors: ``(n, d, m)`` for ``coefficients (s, m)``."""
        slopes = self._slopes(whitened)
        weighted = slopes @ coefficients  # (n, m): sum_k slope_nk v_km
        return (
            _along(slopes, coefficients, self.centres) - whitened[:, :, None] * weighted[:, None, :]
        )


def _along(slopes: np.ndarray, coefficients: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """``sum_k slopes[n, k] coefficients[k, m] directions[k, d]`` as ``(n, d, m)``.

    One batched matrix product: NumPy's ``einsum`` takes this contraction without BLAS, six to
    nine times slower at the sizes of a width choice (30 points, 1000 units, 25 penalties).
    """
    weighted = slopes[:, None, :] * coefficients.T[None, :, :]  # (n, m, s)
    return np.matmul(weighted, directions).transpose(0, 2, 1)


def make_hidden_layer(
    kind: str,
    rng: np.random.Generator,
    n_hidden: int,
    whitened_points: np.ndarray,
    activation: str = "softplus",
    scale: float = 1.0,
) -> AdditiveLayer | RadialLayer:
    """Draw a hidden layer of ``kind`` ``"additive"`` or ``"radial"`` for whitened inputs."""
    dim = whitened_points.shape[1]
    if kind == "additive":
        return AdditiveLayer.draw(rng, n_hidden, dim, activation, scale)
    if kind == "radial":
        return RadialLayer.draw(rng, n_hidden, whitened_points, scale)
    raise ValueError(f"hidden_units must be 'additive' or 'radial', got {kind!r}.")
