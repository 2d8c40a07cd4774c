"""Loops over engine results that end even when a broken engine's would not (contract §10.7).

A loop that runs until the engine returns an empty page turns an engine whose
pages never end (a cursor it ignores, rows it invents) into a silent hang. Every
such loop in the suite is bounded: by ``pages`` here, or by a ``for ... in
range(most)`` with an ``else`` that fails saying what never came. (The kit's
per-test time budget, ``certify.budget``, bounds the waits these cannot.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

MOST_PAGES = 1000
"""More pages than any test of the suite reads from one listing."""


def pages(
    read: Callable[[int], Sequence[T]],
    position: Callable[[T], int],
    *,
    what: str,
    start: int = 0,
    most: int = MOST_PAGES,
) -> list[T]:
    """Every item of a keyset-paged listing: ``read(after)`` page after page, each
    after the last item's ``position``, until an empty page.

    Fails, rather than looping on, when a page does not start past ``after`` (a
    cursor the engine ignores) or when ``most`` pages have not reached the end.
    """
    items: list[T] = []
    after = start
    for _ in range(most):
        page = read(after)
        if not page:
            return items
        first = position(page[0])
        assert first > after, (
            f"{what} after {after} returned {first} again: a listing whose cursor the "
            "engine ignores never ends"
        )
        items.extend(page)
        after = position(page[-1])
    raise AssertionError(f"{what} never returned an empty page after {most} pages")
