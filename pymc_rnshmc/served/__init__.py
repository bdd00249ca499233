"""Models served elsewhere, as PyMC models: UM-Bridge servers (any language, any machine).

:class:`UMBridgeModel` is the client of one served model, :class:`UMBridgeOp` puts it into a
PyMC model. Needs ``requests`` (the ``umbridge`` extra: ``pip install "pymc-rnshmc[umbridge]"``,
which also brings ``umbridge`` to serve Python models).
"""

from pymc_rnshmc.served.client import UMBridgeModel
from pymc_rnshmc.served.op import UMBridgeOp

__all__ = ["UMBridgeModel", "UMBridgeOp"]
