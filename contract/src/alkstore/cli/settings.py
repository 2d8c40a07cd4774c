"""How a command opens the store: the group's ``--url`` and ``--opt``, kept until a
command needs them (so ``--help`` needs no URL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

import alkstore

from ..api import Store


@dataclass(frozen=True, slots=True)
class Settings:
    """How to open the store; each command opens it only when it runs (so ``--help``
    needs no URL)."""

    url: str | None
    options: dict[str, Any]


def open_store(ctx: click.Context) -> Store:
    """The store ``--url``/``--opt`` name, closed when the command ends."""
    settings = ctx.find_object(Settings)
    assert settings is not None  # the group callback always sets it
    if not settings.url:
        raise click.UsageError("no store URL: pass --url URL or set ALKSTORE_URL", ctx)
    store = alkstore.open(settings.url, **settings.options)
    ctx.call_on_close(store.close)
    return store
