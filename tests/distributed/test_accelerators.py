"""Accelerator requests, pure: the reference's names ("GPU_8xH100") parsed, node counts derived, and a
cluster's nodes judged against a request."""

from __future__ import annotations

import doctest
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.distributed import accelerators
from uc_jupyter.distributed.accelerators import (
    KNOWN_GPU_TYPES,
    Accelerators,
    NodeResources,
    has_gpus,
    matches,
    parse_accelerator_type,
    request,
    shortfall,
)

models = st.sampled_from(KNOWN_GPU_TYPES)
per_node = st.integers(min_value=1, max_value=64)
spellings = st.sampled_from([str.upper, str.lower, str])  # the reference's own are upper case; any case reads


def test_the_docstring_examples_run() -> None:
    assert doctest.testmod(accelerators).failed == 0


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("GPU_8xH100", (8, "H100")),
        ("GPU_1xA10", (1, "A10")),
        ("GPU_4xA100", (4, "A100")),
        ("H100", (None, "H100")),
        ("gpu_2xl40s", (2, "L40S")),
        ("a10g", (None, "A10G")),
    ],
)
def test_reference_names(value: str, parsed: tuple[int | None, str]) -> None:
    assert parse_accelerator_type(value) == parsed


@given(models, per_node, spellings)
def test_a_per_node_name_reads_back_as_its_count_and_model(model: str, count: int, spelled: object) -> None:
    name = f"GPU_{count}x{model}"
    assert parse_accelerator_type(spelled(name)) == (count, model)  # type: ignore[operator]
    assert parse_accelerator_type(spelled(model)) == (None, model)  # type: ignore[operator]


@given(models, per_node, st.integers(min_value=1, max_value=16))
def test_a_multiple_of_the_per_node_count_spans_that_many_nodes(model: str, each: int, nodes: int) -> None:
    wanted = request(each * nodes, f"GPU_{each}x{model}")
    assert wanted == Accelerators(each * nodes, model, each)
    assert wanted.nodes == nodes
    assert request(None, f"GPU_{each}x{model}") == Accelerators(each, model, each)  # one node's worth


@given(models, st.integers(min_value=2, max_value=64), st.integers(min_value=1, max_value=1000))
def test_a_count_that_is_not_a_multiple_is_one_line_naming_both(model: str, each: int, count: int) -> None:
    if count % each == 0:
        count += 1
    with pytest.raises(ValueError, match=f"^num_accelerators={count} is not a multiple of {each}, ") as caught:
        request(count, f"GPU_{each}x{model}")
    assert "\n" not in str(caught.value)


@given(models, st.integers(min_value=1, max_value=1000))
def test_a_plain_model_says_nothing_of_nodes(model: str, count: int) -> None:
    assert request(count, model) == Accelerators(count, model, None)
    assert request(count, model).nodes is None
    assert request(count) == Accelerators(count)


@pytest.mark.parametrize(
    ("count", "kind", "message"),
    [
        (
            12,
            "GPU_8xH100",
            "num_accelerators=12 is not a multiple of 8, the GPUs per node of "
            "accelerator_type='GPU_8xH100': give 8, 16 or 24",
        ),
        (None, "H100", "num_accelerators must be a positive whole number of ranks, got None"),
        (0, None, "num_accelerators must be a positive whole number of ranks, got 0"),
        (True, None, "num_accelerators must be a positive whole number of ranks, got True"),
        (8, "GPU_0xH100", "accelerator_type='GPU_0xH100' has 0 GPUs per node"),
        (8, "GPU_8xH1000", "unknown accelerator_type 'GPU_8xH1000': did you mean 'H100'?"),
        (8, "", "accelerator_type must be a GPU model name such as 'H100' or 'GPU_8xH100', got ''"),
        (8, 8, "accelerator_type must be a GPU model name"),
    ],
)
def test_bad_requests(count: object, kind: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}") as caught:
        request(count, kind)
    assert "\n" not in str(caught.value)


def test_models_match_whole_words_of_device_and_ray_names() -> None:
    assert matches("A100", "NVIDIA A100-SXM4-80GB") and matches("A100", "A100-80G")
    assert not matches("A10", "NVIDIA A100-SXM4-80GB") and matches("A10G", "NVIDIA A10G")
    assert matches("H100", "H100")


def node(address: str, gpus: int, free: int, kind: str | None = "H100") -> NodeResources:
    typed = {f"accelerator_type:{kind}": 1.0} if kind else {}
    return NodeResources(address, {"CPU": 16.0, "GPU": float(gpus), **typed}, {"CPU": 8.0, "GPU": float(free), **typed})


def test_a_cluster_with_the_accelerators_free_is_enough() -> None:
    cluster = [node("10.0.0.5", 8, 8), node("10.0.0.6", 8, 8), node("10.0.0.7", 4, 4, "A10G")]
    assert shortfall(request(16, "GPU_8xH100"), cluster) is None
    assert shortfall(request(12, "H100"), cluster) is None  # no split asked: any H100s
    assert shortfall(request(20), cluster) is None  # any type
    assert shortfall(request(4, "A10G"), cluster) is None


def test_what_is_missing_says_what_is_free_node_by_node() -> None:
    cluster = [node("10.0.0.5", 8, 8), node("10.0.0.6", 8, 3)]
    assert shortfall(request(16, "GPU_8xH100"), cluster) == (
        "2 nodes x 8 H100 asked, but the cluster has fewer than 2 node(s) with 8 free H100 GPUs each; "
        "free now: 10.0.0.5 8 of 8 GPUs; 10.0.0.6 3 of 8 GPUs"
    )
    assert shortfall(request(12), cluster) == (
        "12 GPUs asked, but the cluster has fewer than 12 free GPUs; "
        "free now: 10.0.0.5 8 of 8 GPUs; 10.0.0.6 3 of 8 GPUs"
    )
    assert shortfall(request(2, "A100"), cluster) == (
        "no node of the cluster has A100 GPUs (it has H100); ask for one of those, or no type"
    )


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=6), st.integers(1, 40))
def test_enough_means_the_free_gpus_cover_the_count(shape: list[tuple[int, int]], count: int) -> None:
    cluster = [node(f"10.0.0.{i}", max(t, f), min(t, f)) for i, (t, f) in enumerate(shape)]
    free = sum(min(t, f) for t, f in shape)
    assert (shortfall(request(count), cluster) is None) == (free >= count)
    assert has_gpus(cluster) == any(max(t, f) > 0 for t, f in shape)
