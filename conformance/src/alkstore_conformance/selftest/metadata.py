"""Broken job metadata (contract 1.2 §20): a redriven copy loses its metadata.

The reference SQLite engine, whose redrive copies a dead job without its metadata
(as an engine that lists the redrive's columns by hand and forgot the new one would):
the new job's trace context, request id and the rest are gone.
"""

from __future__ import annotations

import json
import sqlite3

from alkstore.params import Redrive
from alkstore_sqlite import SqliteDriver


class MetadataDroppedOnRedriveDriver(SqliteDriver):
    """Redrives dead jobs as the reference does, then clears the copies' metadata."""

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        from alkstore_sqlite.migrations import JOBS

        new_ids = super().redrive(c, params)
        if new_ids:
            c.execute(
                f"UPDATE {JOBS} SET metadata = NULL WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(new_ids),),
            )
        return new_ids
