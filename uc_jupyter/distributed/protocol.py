"""The messages between the kernel and its ranks, and the ordered channel that carries them.

Each rank has one channel to the kernel (a Unix socket pair). Everything a rank says travels on it in
order: output lines, telemetry samples and the reply to a call, so no output line of a call arrives
after that call's reply. Messages are frozen dataclasses; functions, arguments and results travel
as cloudpickled ``bytes`` inside them, so a payload that fails to unpickle is one rank's error, not a
broken channel.

Example:
    >>> import socket
    >>> a, b = socket.socketpair()
    >>> left, right = Channel.over(a), Channel.over(b)
    >>> left.send(Output(stream="stdout", text="hello\\n")); right.recv()
    Output(stream='stdout', text='hello\\n')
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Literal

from uc_jupyter.distributed.errors import RemoteFailure
from uc_jupyter.telemetry.model import Sample

__all__ = [
    "Call",
    "CallKind",
    "Channel",
    "Output",
    "Ready",
    "Reply",
    "StartFailed",
    "Stop",
    "Telemetry",
    "decode",
    "encode",
]

CallKind = Literal["run", "execute", "push", "pull"]


# ---------------------------------------------------------------- kernel -> rank
@dataclass(frozen=True)
class Call:
    """Run something: ``run`` (a function, args, kwargs), ``execute`` (cell source), ``push`` (a dict
    of names to bind), ``pull`` (a tuple of names to send back). ``payload`` is cloudpickled.
    ``principal`` is who the call was made as in the kernel: the rank acts as that principal for it.
    ``mlflow_run``: the MLflow run active in the kernel (:func:`~uc_jupyter.telemetry.mlflow_runs.caller_run`),
    which the rank's loaders log into for the call."""

    call_id: int
    kind: CallKind
    payload: bytes
    principal: str
    mlflow_run: str | None = None


@dataclass(frozen=True)
class Stop:
    """Leave the process group and exit."""


# ---------------------------------------------------------------- rank -> kernel
@dataclass(frozen=True)
class Ready:
    """The rank started and ``torch.distributed`` is initialised."""

    rank: int
    pid: int
    device: str
    backend: str


@dataclass(frozen=True)
class StartFailed:
    """The rank could not start (import error, rendezvous failure)."""

    failure: RemoteFailure


@dataclass(frozen=True)
class Output:
    """One or more whole lines the rank wrote (a partial line only right before a reply)."""

    stream: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class Telemetry:
    """The newest samples of the rank's DataLoaders (cumulative, so dropping one loses nothing)."""

    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Reply:
    """The end of a call on one rank: a cloudpickled result, or a failure."""

    call_id: int
    value: bytes | None = None
    failure: RemoteFailure | None = None


def encode(message: object) -> bytes:
    """``message`` pickled as a channel sends it."""
    return bytes(ForkingPickler.dumps(message))


def decode(data: bytes) -> object:
    """A message from :meth:`Channel.recv_bytes` or :func:`encode`."""
    return ForkingPickler.loads(data)


class Channel:
    """A message pipe whose sends are atomic across threads (output pumps, telemetry, the reply)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def over(cls, sock: socket.socket) -> Channel:
        """Take over ``sock`` (the Channel owns its file descriptor from now on)."""
        return cls(Connection(sock.detach()))

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(Connection(fd))

    def send(self, message: object) -> None:
        with self._lock:
            self._connection.send(message)

    def recv(self) -> object:
        """The next message; EOFError or OSError once the other side is gone."""
        return self._connection.recv()

    def send_bytes(self, data: bytes) -> None:
        """Send a message already pickled (:func:`encode`): what a relay passes on unread."""
        with self._lock:
            self._connection.send_bytes(data)

    def recv_bytes(self) -> bytes:
        """The next message, still pickled (:func:`decode` reads it); EOFError or OSError once the peer is gone."""
        return self._connection.recv_bytes()

    def close(self) -> None:
        self._connection.close()
