"""``sqlite:///relative.db`` and ``sqlite:////abs/path.db`` <-> a database file path."""

from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlsplit

from alkstore import InvalidOptions

SCHEME = "sqlite"

_IN_MEMORY = (
    "an in-memory SQLite database cannot back an alkstore store: every thread, "
    "process and watcher opens its own connection, and only a database file is "
    "shared between connections (WAL mode needs a file). Use a file URL such as "
    "'sqlite:///app.db' (relative) or 'sqlite:////var/lib/app/app.db' (absolute)"
)


def database_path(url: str) -> str:
    """The absolute path of the database file ``url`` names.

    Resolved once, at open: every connection opened later (by other threads,
    after a ``chdir``) must reach the same file.
    """
    if not isinstance(url, str):
        raise InvalidOptions(f"a sqlite URL is a str, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() != SCHEME:
        raise InvalidOptions(f"the sqlite engine takes 'sqlite:///<path>' URLs, got {url!r}")
    if not url[len(parts.scheme) + 1 :].startswith("//"):
        raise InvalidOptions(f"a sqlite URL looks like 'sqlite:///<path>', got {url!r}")
    if parts.netloc:
        raise InvalidOptions(
            f"a sqlite URL has no host: 'sqlite:///{parts.netloc}{parts.path}' names a "
            f"relative path and 'sqlite:////abs/path.db' an absolute one; got {url!r}"
        )
    if parts.query or parts.fragment:
        raise InvalidOptions(
            f"a sqlite URL carries no query string; pass options as keyword arguments "
            f"(alkstore.open(url, synchronous='FULL')); got {url!r}"
        )
    path = unquote(parts.path)[1:]  # the third slash separates the (empty) host from the path
    if not path or path == ":memory:" or path.startswith("file:"):
        raise InvalidOptions(_IN_MEMORY)
    if "\x00" in path:
        raise InvalidOptions("a sqlite database path must not contain NUL")
    return os.path.abspath(path)


def database_url(path: str) -> str:
    """The URL of the database file at ``path`` (made absolute)."""
    return f"{SCHEME}:///{quote(os.path.abspath(path))}"
