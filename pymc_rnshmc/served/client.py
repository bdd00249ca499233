"""A client of a model served over UM-Bridge, with time limits on every request.

UM-Bridge is an HTTP protocol for numerical models in any language: ``POST /Evaluate`` with
the input vectors returns the output vectors, ``POST /Gradient`` a vector-Jacobian product,
and ``/Info``, ``/ModelInfo``, ``/InputSizes`` and ``/OutputSizes`` describe the model.
The ``umbridge`` package serves Python models and has a client, ``umbridge.HTTPModel``; its
requests (umbridge 1.2.10) wait without a time limit, so a server that stops answering would
hang the sampler for good, and a refused connection surfaces as a bare ``requests`` error.
This client speaks the same JSON through ``requests`` (one session per thread) and adds what a
sampler needs:

* every request has a connect and a read timeout, and a refused or dropped connection is tried
  again ``retries`` times with a growing pause; after that, after a read timeout, an answer
  broken off, or a gateway's 502, 503 or 504, it raises
  :class:`~pymc_rnshmc.exceptions.ServedModelUnavailable`, which stops sampling (never a
  rejection: a server that does not answer says nothing about the posterior);
* an answer that carries an error (the protocol's ``{"error": ...}``, or an HTTP error status,
  as when the served model raised) raises :class:`~pymc_rnshmc.exceptions.ServedModelError`,
  the model's failure at those parameters, which the failing-model policy handles;
* outputs of ``nan`` or ``inf``, which umbridge's Python server writes as bare words that JSON
  does not allow, are read as floats, so the policy counts them as the rejections they are.

The client pickles without its sessions, and a process opens its own (a forked child too), so
worker processes (``ProcessEvaluator``, Dask, or ``pm.sample(cores=n)``) each have their own
connections and send their requests concurrently.

References
----------
.. [1] Seelinger, L., Cheng-Seelinger, V., Davis, A., Parno, M., & Reinarz, A. (2023).
   UM-Bridge: Uncertainty quantification and modeling bridge. Journal of Open Source Software,
   8(83), 4748.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Sequence

import numpy as np

from pymc_rnshmc._checks import check_non_negative_integer, check_positive_number
from pymc_rnshmc.exceptions import ServedModelError, ServedModelUnavailable

__all__ = ["UMBridgeModel"]

PROTOCOL_VERSION = 1.0
"""The UM-Bridge protocol version this client speaks."""

FIRST_PAUSE = 0.25
"""Seconds before the first retry of a refused connection; doubled for each further try."""

UNAVAILABLE_STATUS = (502, 503, 504)
"""HTTP statuses of a proxy or load balancer whose model did not answer: no model's answer."""

_BARE_NONFINITE = re.compile(r"(?<![\w.])(-?)(nan|inf)(?![\w.])")


def _read_json(text: str) -> dict:
    """The answer's JSON, with Python's bare ``nan`` and ``inf`` read as floats."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        spelled = {"nan": "NaN", "inf": "Infinity"}
        return json.loads(_BARE_NONFINITE.sub(lambda m: m[1] + spelled[m[2]], text))


class UMBridgeModel:
    """A model served over UM-Bridge: its sizes, outputs and gradients, with time limits.

    Parameters
    ----------
    url : str
        The server, e.g. ``"http://localhost:4242"``.
    name : str
        The model's name on the server (``/Info`` lists them).
    config : dict, optional
        Sent with every request (for example ``{"level": 0}`` for a coarse level).
    timeout : float
        Seconds to wait for one answer (a solve); past it the model counts as unavailable.
        Set it well above the slowest solve.
    connect_timeout : float
        Seconds to wait for a connection.
    retries : int
        Further tries of a request whose connection was refused or dropped (a server
        restarting), with pauses of 0.25, 0.5, 1, ... s.

    Raises
    ------
    ServedModelUnavailable
        The server could not be reached.
    ValueError
        The server does not serve ``name``, or not with ``Evaluate``, or speaks another
        protocol version.

    Examples
    --------
    >>> forward = UMBridgeModel("http://localhost:4242", "forward")  # doctest: +SKIP
    >>> forward.evaluate([np.array([0.1, 0.2])])  # doctest: +SKIP
    [array([...])]
    """

    def __init__(
        self,
        url: str,
        name: str = "forward",
        config: dict | None = None,
        *,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        retries: int = 2,
    ) -> None:
        self.url = str(url).rstrip("/")
        self.name = str(name)
        self.config = dict(config or {})
        self.timeout = check_positive_number("timeout", timeout)
        self.connect_timeout = check_positive_number("connect_timeout", connect_timeout)
        self.retries = check_non_negative_integer("retries", retries)
        self._local = threading.local()
        self._check_served()
        support = self._post("ModelInfo", {"name": self.name})["support"]
        if not support.get("Evaluate", False):
            raise ValueError(f"The model {self.name!r} at {self.url} does not support Evaluate.")
        self.supports_gradient = bool(support.get("Gradient", False))
        body = {"name": self.name, "config": self.config}
        self.input_sizes = tuple(int(n) for n in self._post("InputSizes", body)["inputSizes"])
        self.output_sizes = tuple(int(n) for n in self._post("OutputSizes", body)["outputSizes"])

    def _check_served(self) -> None:
        info = self._request("get", "Info", None)
        if info.get("protocolVersion") != PROTOCOL_VERSION:
            raise ValueError(
                f"The server at {self.url} speaks UM-Bridge protocol version "
                f"{info.get('protocolVersion')!r}; this client speaks {PROTOCOL_VERSION}."
            )
        if self.name not in info.get("models", []):
            raise ValueError(
                f"The server at {self.url} does not serve a model named {self.name!r}; it "
                f"serves {info.get('models', [])}."
            )

    # ----------------------------------------------------------------- the model
    def evaluate(self, parameters: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The output vectors at the input vectors ``parameters`` (one request)."""
        body = {"name": self.name, "input": self._inputs(parameters), "config": self.config}
        outputs = self._post("Evaluate", body)["output"]
        return [np.asarray(output, dtype=float) for output in outputs]

    def gradient(
        self, out_wrt: int, in_wrt: int, parameters: Sequence[np.ndarray], sens: np.ndarray
    ) -> np.ndarray:
        """``sens`` times the Jacobian of output ``out_wrt`` in input ``in_wrt`` (one request)."""
        if not self.supports_gradient:
            raise ServedModelError(
                f"the model {self.name!r} serves no Gradient", "UnsupportedFeature"
            )
        body = {
            "name": self.name,
            "outWrt": int(out_wrt),
            "inWrt": int(in_wrt),
            "input": self._inputs(parameters),
            "sens": np.asarray(sens, dtype=float).tolist(),
            "config": self.config,
        }
        return np.asarray(self._post("Gradient", body)["output"], dtype=float)

    def _inputs(self, parameters: Sequence[np.ndarray]) -> list[list[float]]:
        inputs = [np.asarray(p, dtype=float).ravel().tolist() for p in parameters]
        sizes = tuple(len(vector) for vector in inputs)
        if sizes != self.input_sizes:
            raise ValueError(
                f"The model {self.name!r} takes inputs of sizes {self.input_sizes}, got {sizes}."
            )
        return inputs

    # ----------------------------------------------------------------- HTTP
    def _post(self, route: str, body: dict) -> dict:
        return self._request("post", route, body)

    def _request(self, method: str, route: str, body: dict | None) -> dict:
        """One request, tried again on refused connections; its JSON, or a clear error."""
        import requests

        for attempt in range(self.retries + 1):
            try:
                response = getattr(self._session(), method)(
                    f"{self.url}/{route}",
                    json=body,
                    timeout=(self.connect_timeout, self.timeout),
                )
                break
            except requests.exceptions.ReadTimeout as error:
                raise self._unavailable(f"gave no answer within {self.timeout:g} s") from error
            except requests.exceptions.ConnectionError as error:
                if attempt == self.retries:
                    tries = self.retries + 1
                    raise self._unavailable(f"refused or dropped {tries} connections") from error
                time.sleep(FIRST_PAUSE * 2**attempt)
            except requests.exceptions.RequestException as error:  # cut off mid-answer, ...
                raise self._unavailable(f"broke off ({type(error).__name__}: {error})") from error
        return self._answer(response)

    def _answer(self, response) -> dict:
        """The answer's JSON; an error answer raises (the model's, or the server's silence)."""
        if response.status_code in UNAVAILABLE_STATUS:
            raise self._unavailable(f"answered HTTP {response.status_code}")
        try:
            payload = _read_json(response.text)
        except json.JSONDecodeError:
            payload = None
        error = payload.get("error") if isinstance(payload, dict) else None
        if error is not None:
            kind, message = (
                (str(error.get("type")), str(error.get("message")))
                if isinstance(error, dict)
                else ("Error", str(error))
            )
            raise ServedModelError(f"the server answered {kind}: {message}", kind)
        if response.status_code != 200 or not isinstance(payload, dict):
            first = (response.text.strip().splitlines() or ["(empty)"])[0][:200]
            kind = f"HTTP {response.status_code}" if response.status_code != 200 else "no JSON"
            raise ServedModelError(f"the server answered {kind}: {first}", kind)
        return payload

    def _unavailable(self, what: str) -> ServedModelUnavailable:
        return ServedModelUnavailable(
            f"The UM-Bridge server at {self.url} (model {self.name!r}) {what}. It is down, "
            "stuck or overloaded; a served model that does not answer stops sampling rather "
            "than rejecting the point. Check the server (serve_models(..., max_workers=n) "
            "answers n requests at once), or raise timeout= if a solve takes longer."
        )

    def _session(self):
        """The calling thread's ``requests`` session, opened in this process.

        Threads do not share sessions, and neither do processes: a child forked by
        ``pm.sample(cores=n)`` or a fork pool inherits the parent's open connection, and two
        processes reading one socket would take each other's answers.
        """
        if getattr(self._local, "pid", None) != os.getpid():
            import requests

            self._local.session = requests.Session()
            self._local.pid = os.getpid()
        return self._local.session

    # ----------------------------------------------------------------- pickling
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_local"]  # sessions stay in the process that opened them
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"UMBridgeModel({self.url!r}, {self.name!r}, config={self.config!r})"
