"""The draws that pooled chains made before a run stopped early: an error, or Ctrl-C.

PyMC keeps the draws of an interrupted chain when it samples chains one by one, but not when it
samples a population: ``pm.sample`` then re-raises the interrupt and the traces are lost with
it. Each chain keeps its own positions (:class:`~pymc_rnshmc.step_methods.chain_log.ChainLog`),
so :func:`pymc_rnshmc.sample` can still return what was drawn, and an error that stops the
chains can carry their draws.
"""

from __future__ import annotations

import numpy as np
from pymc.backends.base import MultiTrace
from pymc.backends.ndarray import NDArray

from pymc_rnshmc.step_methods.model_failures import ParameterLayout

__all__ = ["pooled_draws", "kept_draws_as_trace"]


def _common_length(chains) -> int:
    """Draws that every chain has made (a round stopped midway leaves some one ahead)."""
    return min((len(chain.log.draws) for chain in chains), default=0)


def pooled_draws(chains, layout: ParameterLayout) -> dict[str, np.ndarray]:
    """``{name: (chain, draw, *shape)}``: every chain's draws so far, tuning draws first."""
    length = _common_length(chains)
    if length == 0:
        return {}
    per_chain = [layout.unravel_rows(chain.log.draws[:length]) for chain in chains]
    return {name: np.stack([draws[name] for draws in per_chain]) for name in layout.names}


def kept_draws_as_trace(model, chains, layout: ParameterLayout) -> MultiTrace | None:
    """The chains' draws after tuning as PyMC's trace, or ``None`` if there are none.

    Recorded through PyMC's own ``NDArray`` backend, so deterministics and the constrained
    values are computed as ``pm.sample`` computes them; no sampler statistics.
    """
    length = _common_length(chains)
    tuning = max(chain.log.tuning_draws for chain in chains)
    if length <= tuning:
        return None
    traces = []
    for index, chain in enumerate(chains):
        rows = layout.unravel_rows(chain.log.draws[tuning:length])
        trace = NDArray(model=model)
        trace.setup(draws=length - tuning, chain=index)
        for draw in range(length - tuning):
            trace.record({name: rows[name][draw] for name in layout.names}, in_warmup=False)
        trace.close()
        traces.append(trace)
    return MultiTrace(traces)
