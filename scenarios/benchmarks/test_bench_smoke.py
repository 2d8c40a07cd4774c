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
sys.path.insert(0, str(RUN.parent))  # the harness's modules, as run.py sees them

from bench_catalog import WORKLOADS  # noqa: E402

ENGINE_ONLY = {entry.key for entry in WORKLOADS if not entry.baseline}
"""Workloads with no plain twin (latencies, the stats scrape)."""


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
    assert set(plain) == set(engine) - ENGINE_ONLY
    assert {"wake", "pubsub", "stats_1m"} <= ENGINE_ONLY
    assert all(document["ratios"]["sqlite"][key] is not None for key in plain)
    assert "plain sqlite3" in done.stdout
