"""Small facts about local processes and ports."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

__all__ = ["alive", "client_connections", "free_port", "listening", "stamp", "stamp_alive", "usable_cpus"]

# States of a socket in /proc/net/tcp.
_ESTABLISHED = "01"
_LISTEN = "0A"


def alive(pid: int) -> bool:
    """Is process ``pid`` running? A zombie (exited, not yet reaped) counts as dead: it will never
    release anything or answer.

    Example:
        >>> alive(os.getpid())
        True
    """
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stamp(pid: int | None = None) -> str:
    """Who process ``pid`` (default: this one) is, in a form that outlives it: ``<machine>/<pid>/<start>``.
    ``<machine>`` is the kernel's boot id and the pid namespace (two containers on one kernel are two
    machines: their pids are not each other's); ``<start>`` is the process's start time in clock ticks
    since boot, so a pid used again by a later process is not taken for the one stamped. Written into
    what a writer leaves while it runs (a checkpoint's ``_SAVING``, an export's prefix) so that a later
    writer can tell a dead writer's leftovers from a live one's (:func:`stamp_alive`).

    Example:
        >>> stamp_alive(stamp())
        True
    """
    pid = os.getpid() if pid is None else pid
    return f"{_machine()}/{pid}/{_started(pid)}"


def stamp_alive(given: str) -> bool | None:
    """Whether the process :func:`stamp` stamped still runs: True or False on this machine, None when
    the stamp is another machine's or not a stamp (nothing here can tell: the caller's rule for the
    unknown applies, such as an age).

    Example:
        >>> stamp_alive(stamp(1)), stamp_alive("another-machine/1/1"), stamp_alive("no stamp")
        (True, None, None)
    """
    machine, _, rest = given.rpartition("/")
    machine, _, pid = machine.rpartition("/")
    if not machine or machine != _machine() or not pid.isdigit() or not rest.isdigit():
        return None
    return alive(int(pid)) and _started(int(pid)) == int(rest)


def _machine() -> str:
    """This kernel's boot id and this process's pid namespace: the processes whose pids we can judge."""
    boot = "unknown-boot"
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = 0
    with contextlib.suppress(OSError):
        namespace = os.stat("/proc/self/ns/pid").st_ino
    return f"{boot}:{namespace}"


def _started(pid: int) -> int:
    """Process ``pid``'s start time (clock ticks since boot; -1 when it is gone or cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable(host: str, port: int, timeout: float, *, tls: bool = False) -> str | None:
    """None when something at ``host:port`` accepts a TCP connection within ``timeout`` seconds (and,
    with ``tls``, completes a TLS handshake a client that verifies certificates with the system's
    roots accepts), else why not, in a few lower-case words for a one-line error. The one probe of
    every endpoint we report on: a Spark Connect server, an object store.

    Example:
        >>> unreachable("127.0.0.1", free_port(), 1.0), unreachable("no-such-host.invalid", 80, 1.0)
        ('connection refused', 'the name no-such-host.invalid does not resolve')
    """
    name = host.strip("[]")
    try:
        connection = socket.create_connection((name, port), timeout=timeout)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except socket.gaierror:
        return f"the name {name} does not resolve"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    with connection:
        return _tls_refused(connection, name) if tls else None


def _tls_refused(connection: socket.socket, host: str) -> str | None:
    """What a TLS handshake over ``connection`` says (None when it succeeds)."""
    import ssl

    try:
        with ssl.create_default_context().wrap_socket(connection, server_hostname=host):
            return None
    except ssl.SSLCertVerificationError as refused:
        return f"its TLS certificate is not trusted ({refused.verify_message})"
    except (ssl.SSLError, OSError) as failed:
        return f"the TLS handshake failed ({getattr(failed, 'reason', None) or failed})"


def client_connections(port: int, proc_net: Path = Path("/proc/net")) -> int | None:
    """How many established TCP connections end at ``port`` on this machine; None without /proc."""
    return _sockets(port, _ESTABLISHED, proc_net)


def listening(port: int, proc_net: Path = Path("/proc/net")) -> bool | None:
    """Whether something listens on TCP ``port`` here (asked without connecting, so that the
    question is never counted as a client); None without /proc."""
    count = _sockets(port, _LISTEN, proc_net)
    return None if count is None else count > 0


def _sockets(port: int, state: str, proc_net: Path) -> int | None:
    count, found = 0, False
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc_net / table).read_text().splitlines()[1:]
        except OSError:
            continue
        found = True
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == state and int(parts[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count if found else None


def usable_cpus() -> int:
    """The CPUs this process may run on: what workers of this kernel's loaders can use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
