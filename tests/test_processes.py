"""uc_jupyter.processes.unreachable: whether something accepts a TCP connection, and why not, in the
words a one-line error (Spark Connect's, a Ray cluster's) quotes."""

from __future__ import annotations

import socket

from uc_jupyter.processes import free_port, unreachable


def test_a_listening_port_is_reachable_even_if_it_never_answers() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        assert unreachable("127.0.0.1", listening.getsockname()[1], 1.0) is None


def test_a_closed_port_and_an_unknown_host_say_why_in_lower_case_words() -> None:
    assert unreachable("127.0.0.1", free_port(), 1.0) == "connection refused"
    assert unreachable("[127.0.0.1]", free_port(), 1.0) == "connection refused"  # an address as URLs bracket it
    said = unreachable("nohost.invalid", 1, 1.0)
    assert said is not None and said == said.lower() and "\n" not in said
