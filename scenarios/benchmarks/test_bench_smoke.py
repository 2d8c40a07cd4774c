"""The harness runs end to end: ``--quick`` on SQLite, engine and plain baseline side by side.

A smoke test of the machinery (every workload runs, the report is written,
ratios are computed), never of speed: no number is compared with a target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).with_name("run.py")


def test_quick_sqlite_run_reports_every_workload_beside_its_plain_baseline(
    tmp_path: Path,
) -> None:
    report = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(RUN), "--engine", "sqlite", "--quick", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(report.read_text(encoding="utf-8"))
    engine, plain = document["results"]["sqlite"], document["results"]["sqlite:plain"]
    assert set(engine) == set(document["workloads"])
    assert all(m["failure"] is None and m["errors"] == 0 for m in engine.values())
    assert all(m["failure"] is None and m["errors"] == 0 for m in plain.values())
    assert set(plain) == set(engine) - {"wake", "pubsub"}
    assert all(document["ratios"]["sqlite"][key] is not None for key in plain)
    assert "plain sqlite3" in done.stdout
