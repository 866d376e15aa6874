"""uc_jupyter.distributed.launch.ray_cluster, without a cluster: the address a pool means, whether a
node's free resources fit a pool's ranks, how amounts and Ray's long errors are said, and an address
where nothing answers refused in one line before Ray is started."""

from __future__ import annotations

import socket

import pytest

from uc_jupyter.distributed.errors import ClusterError
from uc_jupyter.distributed.launch.ray_cluster import amounts, cluster_address, connection, described, fits


def test_a_ray_client_address_means_itself_and_ray_means_the_variables_ours_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UC_JUPYTER_RAY_ADDRESS", "10.0.0.5:6379")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    assert cluster_address("ray://10.0.0.7:10001") == "ray://10.0.0.7:10001"
    assert cluster_address("ray") == "10.0.0.5:6379"
    monkeypatch.delenv("UC_JUPYTER_RAY_ADDRESS")
    assert cluster_address("ray") == "10.0.0.9:6379"


@pytest.mark.parametrize("empty", ["", None])
def test_ray_without_an_address_is_one_line_naming_both_variables(
    monkeypatch: pytest.MonkeyPatch, empty: str | None
) -> None:
    for name in ("UC_JUPYTER_RAY_ADDRESS", "RAY_ADDRESS"):
        if empty is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, empty)  # set but empty counts as unset
    with pytest.raises(ClusterError) as caught:
        cluster_address("ray")
    message = str(caught.value)
    assert "\n" not in message and "UC_JUPYTER_RAY_ADDRESS" in message and "RAY_ADDRESS" in message


def test_free_resources_fit_when_every_resource_covers_all_ranks() -> None:
    per_rank = {"CPU": 1.0, "GPU": 1.0}
    assert fits({"CPU": 4.0, "GPU": 2.0}, per_rank, 2)
    assert not fits({"CPU": 4.0, "GPU": 2.0}, per_rank, 3)  # GPUs run out first
    assert not fits({"CPU": 4.0}, per_rank, 1)  # a resource the node lacks is none
    assert fits({"CPU": 0.5}, {}, 8)  # nothing asked, everything fits
    assert fits({"CPU": 1.0}, {"CPU": 0.25}, 4)  # fractions add up exactly


def test_amounts_name_the_asked_resources_in_order_and_zero_for_missing_ones() -> None:
    assert amounts({"CPU": 2.0, "GPU": 1.0}) == "2 CPU + 1 GPU"
    assert amounts({"CPU": 2.5, "memory": 1e9}, only={"GPU": 1.0, "CPU": 1.0}) == "0 GPU + 2.5 CPU"


def test_a_long_error_is_said_by_its_type_and_first_line() -> None:
    assert described(ConnectionError("ray client connection timeout\nTraceback ...\n  more")) == (
        "ConnectionError: ray client connection timeout"
    )
    assert described(TimeoutError()) == "TimeoutError"
    assert described(RuntimeError("   ")) == "RuntimeError"


def test_an_address_where_nothing_listens_is_refused_before_ray_starts() -> None:
    import ray

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(ClusterError) as caught:
                connection.take(address)
            assert str(caught.value).startswith(f"no Ray cluster answers at {address} (connection refused): ")
            assert "\n" not in str(caught.value)
    assert not ray.is_initialized()
