"""A Mix's sources on the dashboard (uc_jupyter.widgets.sources): names, shares of the samples and of
the wait, and the source the loop waited on, named in the sources line and in the verdict."""

from __future__ import annotations

import doctest
from dataclasses import replace

from uc_jupyter.telemetry.model import Sample
from uc_jupyter.widgets import sources
from uc_jupyter.widgets.advice import verdict
from uc_jupyter.widgets.passes import since
from uc_jupyter.widgets.sources import source_rows, sources_text, waited_on
from uc_jupyter.widgets.view import DashboardView

from .conftest import loop, snapshot

NAMES = ("/Volumes/main/ml/images", "main.ml.crawl")


def mixing(rank: int, worker: int, counts: tuple[int, ...], seconds: tuple[float, ...], seq: int = 1) -> Sample:
    """A Mix's stream: its samples of each source so far and the seconds each source's stages took."""
    return Sample(
        rank=rank,
        worker=worker,
        seq=seq,
        time=1.0,
        source_samples=counts,
        source_epochs=(0,) * len(counts),
        source_seconds=seconds,
        source_names=NAMES[: len(counts)],
    )


def waiting(rank: int, fetch: float, decode: float, transfer: float = 0.0) -> Sample:
    """Rank ``rank``'s loop, input-bound (100 ms waits, 10 ms steps), its wait split per stage."""
    ran = loop(rank, 1.0, [0.1] * 10, [0.01] * 9)
    return replace(ran, exposed=(fetch, decode, 0.0, transfer, 0.0))


def test_docstring_examples() -> None:
    result = doctest.testmod(sources, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_each_source_gets_the_part_of_the_wait_its_stages_caused_in_proportion_to_their_seconds() -> None:
    # 0.9 s of the 1.0 s waited was fetch and decode; the crawl's stages took 0.8 of the sources' 1.0 s.
    snap = snapshot(1.0, waiting(0, 0.5, 0.4, transfer=0.1), mixing(0, 0, (60, 20), (0.2, 0.8)))
    fast, slow = source_rows(snap)
    assert (fast.name, fast.samples, fast.share, slow.share) == (NAMES[0], 60, 0.75, 0.25)
    assert abs(fast.wait - 0.18) < 1e-9 and abs(slow.wait - 0.72) < 1e-9  # type: ignore[operator]
    assert abs(slow.per_sample - 0.04) < 1e-9
    assert waited_on(snap) == slow
    assert sources_text(snap) == (
        f"sources: {NAMES[0]} 75% (its epoch 0, 3.33 ms a sample, 18% of the wait), "
        f"{NAMES[1]} 25% (its epoch 0, 40.0 ms a sample, 72% of the wait); the loop waits most for {NAMES[1]}"
    )


def test_the_verdict_names_the_source_the_rank_that_waits_most_waited_on() -> None:
    # Rank 1 waits most; its own streams waited on the crawl, rank 0's on the images.
    snap = snapshot(
        1.0,
        replace(waiting(0, 0.2, 0.1), fetch=loop(0, 1.0, [0.02] * 10, [0.01] * 9).fetch),
        waiting(1, 0.6, 0.3),
        mixing(0, 0, (30, 10), (0.9, 0.1)),
        mixing(1, 0, (30, 10), (0.1, 0.9)),
    )
    judged = verdict(snap)
    assert judged.kind == "input-bound" and judged.rank == 1
    assert f"; mostly for {NAMES[1]} (90% of the wait, 25% of the samples)" in judged.text, judged.text
    # A loop with no step between batches is told so, and still which source holds the loader back.
    idle = replace(waiting(0, 0.6, 0.3), between=loop(0, 1.0, [], [0.0001] * 9).between)
    judged = verdict(snapshot(1.0, idle, mixing(0, 0, (30, 10), (0.1, 0.9))))
    assert judged.kind == "no-work", judged.text
    assert judged.text.endswith(f"; mostly for {NAMES[1]} (90% of the wait, 25% of the samples)")


def test_one_source_or_unmeasured_sources_name_no_slow_one() -> None:
    assert waited_on(snapshot(1.0, waiting(0, 0.5, 0.5), mixing(0, 0, (40,), (0.3,)))) is None  # a mix of one
    unmeasured = snapshot(1.0, waiting(0, 0.5, 0.5), mixing(0, 0, (30, 10), (0.0, 0.0)))
    assert waited_on(unmeasured) is None and "mostly for" not in verdict(unmeasured).text
    assert sources_text(unmeasured) == f"sources: {NAMES[0]} 75% (its epoch 0), {NAMES[1]} 25% (its epoch 0)"
    # Without the loop's stage times the share of the wait is not known: the time a sample took still is.
    timed_only = snapshot(1.0, mixing(0, 0, (30, 10), (0.3, 0.9)))
    assert sources_text(timed_only) == (
        f"sources: {NAMES[0]} 75% (its epoch 0, 10.0 ms a sample), {NAMES[1]} 25% (its epoch 0, 90.0 ms a sample)"
    )
    assert sources_text(snapshot(1.0, waiting(0, 0.5, 0.5))) == ""  # a single dataset


def test_a_passs_own_figures_count_only_the_passs_samples_and_seconds() -> None:
    start = snapshot(1.0, waiting(0, 0.5, 0.5), mixing(0, 0, (30, 10), (0.1, 0.9)))
    later = snapshot(2.0, waiting(0, 0.5, 0.5), mixing(0, 0, (60, 20), (0.9, 1.0), seq=2))
    (fast, slow) = source_rows(since(later, start))
    assert (fast.samples, slow.samples) == (30, 10)
    assert abs(fast.seconds - 0.8) < 1e-9 and abs(slow.seconds - 0.1) < 1e-9  # this pass: the images were slow
    assert waited_on(since(later, start)).name == NAMES[0]  # type: ignore[union-attr]


def test_the_dashboard_shows_the_sources_by_name() -> None:
    view = DashboardView.of(snapshot(1.0, waiting(0, 0.5, 0.5), mixing(0, 0, (30, 10), (0.1, 0.9))))
    assert view.sources_text.startswith(f"sources: {NAMES[0]} 75% (its epoch 0, ")
    assert view.sources_text.endswith(f"; the loop waits most for {NAMES[1]}")
    assert f"mostly for {NAMES[1]}" in view.verdict_text
