"""The runtime package carries no test infrastructure on its import path."""

from __future__ import annotations

import subprocess
import sys

IMPORTS_AN_APP_MAKES = "import alkstore, alkstore_postgres; alkstore.load_engine('postgresql')"


def test_opening_the_engine_loads_no_test_infrastructure() -> None:
    probe = (
        f"{IMPORTS_AN_APP_MAKES}; import sys; "
        "print(sorted(m for m in sys.modules if m.startswith('alkstore_postgres.testing')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert loaded == "[]"
