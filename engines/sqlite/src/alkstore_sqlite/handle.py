"""The handle of a unit of work, and how a statement method makes it one transaction.

The handle ``c`` every statement method takes is the ``sqlite3.Connection``
itself. In a ``write`` unit it is in autocommit mode, so each statement commits
on its own (see ``driver``); in ``transaction()`` or an attached caller's
transaction it is inside one from the start.
"""

from __future__ import annotations

import sqlite3

from . import statements as sql


def begin_transaction(c: sqlite3.Connection) -> None:
    """Make the rest of ``c``'s unit one transaction: its statements commit together
    when the unit returns, or none of them does. A no-op inside a transaction (a
    ``transaction()``, an attached caller's, or one begun earlier in the unit).

    ``BEGIN IMMEDIATE`` takes the write lock at once, as every alkstore write does:
    a transaction that began by reading could not always write later (another
    connection's commit in between makes SQLite refuse its first write)."""
    if not c.in_transaction:
        c.execute(sql.BEGIN_WRITE)
