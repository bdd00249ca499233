"""The random-network options a sampler takes, turned into a surrogate (or a user's checked)."""

from __future__ import annotations

from pymc_rnshmc.surrogates.base import PotentialSurrogate
from pymc_rnshmc.surrogates.network.random_network import RandomNetworkSurrogate

__all__ = ["NETWORK_OPTIONS", "network_surrogate"]

NETWORK_OPTIONS = ("n_hidden", "hidden_units", "activation", "quadratic", "penalty")


def network_surrogate(
    surrogate: PotentialSurrogate | None = None,
    *,
    n_hidden: int | None = None,
    hidden_units: str = "additive",
    activation: str = "softplus",
    quadratic: bool = True,
    penalty: float | None = None,
    ceiling: bool = False,
) -> PotentialSurrogate:
    """The given surrogate (checked), or a random network with these options.

    ``ceiling`` is not a sampler option (pass ``surrogate=RandomNetworkSurrogate(ceiling=True)``
    to try it); the Riemannian dynamics take their curvature from the network alone, so
    RNSRMHMC's network never has one.

    Raises
    ------
    TypeError
        ``surrogate`` is a class, or lacks ``fit``, ``potential`` or ``gradient``.
    """
    if surrogate is None:
        return RandomNetworkSurrogate(
            n_hidden=n_hidden,
            hidden_units=hidden_units,
            activation=activation,
            quadratic=quadratic,
            penalty=penalty,
            ceiling=ceiling,
        )
    if isinstance(surrogate, type) or not isinstance(surrogate, PotentialSurrogate):
        raise TypeError(
            "surrogate must be an instance (not a class) providing fit(positions, "
            f"potentials, gradients, rng), potential(positions) and gradient(position); got "
            f"{surrogate!r}."
        )
    return surrogate
