"""The harness runs end to end: ``--quick`` on SQLite, engine and plain baseline side by side.

A smoke test of the machinery (every workload runs, the report is written,
ratios are computed), never of speed: no number is compared with a target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

RUN = Path(__file__).with_name("run.py")
sys.path.insert(0, str(RUN.parent))  # the harness's modules, as run.py sees them

import bench_limits  # noqa: E402
import bench_pgqueuer  # noqa: E402
import bench_worker_scale  # noqa: E402
from bench_before import BEFORE_UNIQUE  # noqa: E402
from bench_catalog import WORKLOADS  # noqa: E402
from bench_dashboard import QUICK_JOBS as DASHBOARD_QUICK_JOBS  # noqa: E402
from bench_dashboard import SSE_STREAMS, Filled, page_paths  # noqa: E402
from bench_graph import FULL, QUICK, WORKERS  # noqa: E402
from bench_report import cell  # noqa: E402
from bench_scheduler import QUICK_SCHEDULES, SCHEDULES, TICK_ROUNDS  # noqa: E402
from bench_sides import Side, SideSpec  # noqa: E402
from bench_workloads import Bench  # noqa: E402

ENGINE_ONLY = {entry.key for entry in WORKLOADS if not entry.baseline}
"""Workloads with no plain twin (latencies, the stats scrape)."""
NOT_ON_SQLITE = {entry.key for entry in WORKLOADS if entry.only not in (None, "sqlite")}
"""Rows of another engine only (the pgqueuer peer rows run on PostgreSQL)."""


def _has_revision(revision: str) -> bool:
    found = subprocess.run(
        ["git", "-C", str(RUN.parent), "cat-file", "-e", f"{revision}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Any]:
    """One ``--quick`` SQLite run for every test here (it takes a while)."""
    report = tmp_path_factory.mktemp("bench") / "bench.json"
    done = subprocess.run(
        [sys.executable, str(RUN), "--engine", "sqlite", "--quick", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(report.read_text(encoding="utf-8"))


def test_quick_sqlite_run_reports_every_workload_beside_its_plain_baseline(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    engine, plain = document["results"]["sqlite"], document["results"]["sqlite:plain"]
    assert set(engine) == set(document["workloads"]) - NOT_ON_SQLITE
    assert all(m["failure"] is None and m["errors"] == 0 for m in engine.values())
    assert all(m["failure"] is None and m["errors"] == 0 for m in plain.values())
    assert set(plain) == set(engine) - ENGINE_ONLY
    assert {"wake", "pubsub", "stats_1m"} <= ENGINE_ONLY
    assert all(document["ratios"]["sqlite"][key] is not None for key in plain)
    assert "plain sqlite3" in done.stdout


def test_quick_sqlite_run_sets_every_plain_workload_beside_the_baseline_with_a_lapse_index(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    plain, fair = document["results"]["sqlite:plain"], document["results"]["sqlite:plain+lapse"]
    assert set(fair) == set(plain)
    assert all(m["failure"] is None and m["errors"] == 0 for m in fair.values())
    assert all(document["lapse_ratios"]["sqlite"][key] is not None for key in fair)
    assert document["lapse_ratio_targets"]["sqlite"]["claim_batch"] == 0.9
    assert "plain + lapse index" in done.stdout


def test_quick_sqlite_run_sets_the_worker_beside_the_hand_loop_in_one_and_four_processes(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    overhead = document["worker_overhead"]["sqlite"]
    assert [(row["processes"], row["worker"]) for row in overhead] == [
        (1, "default"),
        (1, "--log-level warning"),
        (4, "default"),
    ]
    assert all(row["worker_rate_per_s"] > 0 and row["hand_rate_per_s"] > 0 for row in overhead)
    assert "Worker overhead per job against the hand loop" in done.stdout
    # Through the real command line, not the in-process fallback.
    assert "`alkstore worker " in document["results"]["sqlite"]["worker_4p"]["notes"][0]


def test_quick_sqlite_run_sets_unique_enqueue_beside_plain_enqueue_and_the_drivers_floor(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    rows = document["unique_overhead"]["sqlite"]
    expected = [
        ("engine", "1 enqueue"),
        ("engine", "2 enqueue_many (1,000)"),
        ("raw", "1 insert"),
        ("raw", "2 insert, batches of 1,000"),
    ]
    if _has_revision(BEFORE_UNIQUE):
        expected.append(("before", f"1 plain enqueue, {BEFORE_UNIQUE} vs now"))
    else:  # a shallow clone: the row says why it did not run
        assert "plain enqueue before unique jobs: skipped" in done.stderr
    assert [(row["side"], row["workload"]) for row in rows] == expected
    assert all(row["plain_rate_per_s"] > 0 and row["unique_rate_per_s"] > 0 for row in rows)
    assert all(len(row["costs"]) == 2 for row in rows)  # the quick run's rounds
    assert "Unique enqueue against plain enqueue" in done.stdout
    assert "plain enqueue against the bare insert" in done.stdout


def test_quick_sqlite_run_sets_kept_completed_jobs_and_tx_ack_beside_delete_on_ack(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    rows = document["results_ratios"]["sqlite"]
    assert [(row["workload"], row["first"], row["second"]) for row in rows] == [
        ("retention", "delete-on-ack", "kept completed"),
        ("tx.ack", "ack", "tx.ack"),
    ]
    assert all(row["first_rate_per_s"] > 0 and row["second_rate_per_s"] > 0 for row in rows)
    assert all(len(row["ratios"]) == 2 for row in rows)  # the quick run's rounds
    assert "Finished jobs and tx.ack" in done.stdout


def test_quick_sqlite_run_drains_a_small_job_graph_in_four_processes(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (run,) = document["job_graph"]
    assert run["failure"] is None
    assert (run["engine"], run["jobs"], run["workers"]) == ("sqlite", QUICK.jobs, WORKERS)
    assert run["waits"] == QUICK.chains * (QUICK.chain_length - 1) + QUICK.fan_ins
    assert run["rate_per_s"] > 0
    assert 0 <= run["wait_p50_ms"] <= run["wait_p99_ms"]
    assert (FULL.jobs, WORKERS) == (10_000, 4)  # the full run's graph is the issue's
    assert "Job graph: chains and fan-ins" in done.stdout


def test_quick_sqlite_run_ticks_a_thousand_cron_schedules_in_the_full_run_and_fewer_in_quick(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    _, document = quick_run
    tick = document["results"]["sqlite"]["cron_tick"]
    assert tick["failure"] is None
    assert tick["jobs"] == QUICK_SCHEDULES * TICK_ROUNDS  # every schedule fired each tick
    assert SCHEDULES == 1_000  # the full run's row is the thousand schedules


def test_quick_sqlite_run_times_every_dashboard_page_and_the_idle_event_streams(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    [run] = document["dashboard"]
    assert (run["engine"], run["jobs"], run["failure"]) == ("sqlite", DASHBOARD_QUICK_JOBS, None)
    pages = {page["page"]: page for page in run["pages"]}
    assert list(pages) == [name for name, _ in page_paths(Filled("q", 1, 1))]
    assert all(page["failure"] is None and page["status"] == 200 for page in pages.values())
    assert all(page["p50_ms"] > 0 and page["p95_ms"] >= page["p50_ms"] for page in pages.values())
    sse = run["sse"]
    assert (sse["streams"], sse["failure"]) == (SSE_STREAMS, None)
    assert sse["seconds"] > 0
    assert sse["process_cpu_s"] >= 0
    assert sse["server_cpu_s"] is None  # no database server: SQLite
    busy = run["busy"]
    assert busy["failure"] is None
    assert [page["status"] for page in busy["pages"]] == [200, 200]
    assert busy["drained"] > 0  # the worker process acked jobs while the pages were timed
    assert "Dashboard server time at" in done.stdout


def test_a_peer_row_whose_package_is_missing_is_skipped_with_the_reason_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reason = "pgqueuer not installed (test)"
    monkeypatch.setattr(bench_pgqueuer, "missing", lambda: reason)
    # The row gives up before it touches its side or store.
    bench = Bench(
        engine="postgresql",
        side=cast(Side, None),
        side_spec=cast(SideSpec, None),
        store=None,
        jobs=1,
        wake_rounds=1,
        budget_s=1.0,
    )
    for row in (bench_pgqueuer.pgqueuer_enqueue, bench_pgqueuer.pgqueuer_drain):
        m = row(bench)
        assert (m.skipped, m.failure, m.rate) == (reason, None, None)
        assert cell("pgqueuer", m, None) == f"skipped ({reason})"


def test_quick_sqlite_run_sets_each_keys_share_of_claims_under_a_per_key_limit(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (row,) = document["key_fairness"]
    assert row["engine"] == "sqlite"
    assert row["keys"] == 100
    assert row["least_claims_of_a_key"] >= 1  # every key served within the run's claims
    assert row["every_key_served_by_claim"] is not None
    assert "Per-key fairness" in done.stdout


def test_quick_sqlite_run_sets_the_claim_ack_rate_under_a_per_key_limit_beside_none(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (row,) = document["key_backlog"]
    assert row["engine"] == "sqlite"
    assert row["claims"] > 0
    assert row["keyed_claim_ack_per_s"] > 0
    assert row["plain_claim_ack_per_s"] > 0
    assert "as the backlog grows" in done.stdout


def test_quick_sqlite_run_sets_a_never_binding_limit_beside_none_and_holds_the_bound_and_rate(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (row,) = document["limits"]
    assert row["engine"] == "sqlite"
    assert row["limited_rate_per_s"] > 0
    assert row["unlimited_rate_per_s"] > 0
    assert len(row["ratios"]) == 2  # the quick run's rounds
    assert row["bound"]["processes"] == 8
    assert 1 <= row["bound"]["max_processing"] <= row["bound"]["concurrency"] == 4
    assert row["rate"]["starts"] > 0
    assert row["rate"]["max_starts_in_a_window"] <= row["rate"]["rate"]
    assert "Queue limits. L1" in done.stdout


def test_quick_sqlite_run_splits_the_never_binding_limit_by_kind_each_beside_none(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (row,) = document["limits"]
    kinds = {part["kind"]: part for part in row["split"]}
    assert set(kinds) == {"concurrency", "rate", "both"}
    assert kinds["concurrency"]["limits"] == {"concurrency": 10_000, "rate": None, "per": None}
    assert kinds["rate"]["limits"] == {"concurrency": None, "rate": 100_000, "per": 1}
    for part in kinds.values():
        assert part["limited_rate_per_s"] > 0
        assert part["unlimited_rate_per_s"] > 0
        assert len(part["ratios"]) == 2  # the quick run's rounds
    assert "L1 split by kind" in done.stdout


def test_the_most_intervals_open_at_once_counts_an_end_before_a_start_at_the_same_instant() -> None:
    spans = [(0.0, 1.0, 0), (1.0, 2.0, 0), (0.5, 1.5, 0)]
    assert bench_limits.max_overlap(spans) == 2


def test_the_most_starts_in_a_window_counts_the_starts_after_now_minus_per_up_to_now() -> None:
    # per=2: the window at now=11 holds the starts at 10 and 11, not those at 9.
    assert bench_limits.max_in_window([9, 9, 10, 11, 11, 13], 2) == 3
    assert bench_limits.max_in_window([9, 9, 10, 11, 11, 13], 1) == 2


def test_quick_sqlite_run_has_the_worker_scale_rows_with_grouping_off_and_on(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    rows = document["worker_scale"]
    drains = {
        (r["processes"], r["handlers_per_process"], r["ack_window_s"])
        for r in rows
        if r["kind"] == "drain"
    }
    assert drains == {
        (p, h, w)
        for p, h in bench_worker_scale.QUICK_SHAPES
        for w in bench_worker_scale.QUICK_WINDOWS
    }
    assert {r["ack_window_s"] for r in rows if r["kind"] == "light"} == set(
        bench_worker_scale.LIGHT_WINDOWS
    )
    for row in rows:
        assert row["failure"] is None
        assert row["jobs"] > 0
        assert row["completions_per_s"] > 0
        assert 0 <= row["pickup_p50_ms"] <= row["pickup_p99_ms"]
    assert "The worker at 4/16/64 handlers" in done.stdout


def test_quick_sqlite_run_times_a_group_of_acks_beside_one_with_retries_and_fails(
    quick_run: tuple[subprocess.CompletedProcess[str], Any],
) -> None:
    done, document = quick_run
    (row,) = document["group_outcomes"]
    assert row["engine"] == "sqlite"
    assert row["acks_ms"] > 0
    assert row["mixed_ms"] > 0
    assert row["grouped_ms"] > 0
    assert "A worker's group of 64" in done.stdout


def test_a_percentile_is_the_value_at_that_share_of_the_sorted_values() -> None:
    values = [float(n) for n in range(100, 0, -1)]
    assert bench_worker_scale._percentile(values, 0.50) == 51.0
    assert bench_worker_scale._percentile(values, 0.99) == 100.0


def test_a_quick_failing_run_drains_every_row_all_acks_and_failing_side_by_side(
    tmp_path: Path,
) -> None:
    report = tmp_path / "failing.json"
    script = str(RUN.parent / "bench_worker_scale.py")
    done = subprocess.run(
        [
            sys.executable,
            script,
            "--failing",
            "--quick",
            "--engine",
            "sqlite",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(report.read_text(encoding="utf-8"))["rows"]
    shapes = {
        (r["kind"], r["processes"], r["handlers_per_process"], r["ack_window_s"]) for r in rows
    }
    assert shapes == {
        (kind, p, h, w)
        for kind in ("drain", "fail")
        for p, h in bench_worker_scale.QUICK_SHAPES
        for w in bench_worker_scale.FAILING_WINDOWS
    }
    assert all(r["failure"] is None and r["jobs"] == bench_worker_scale.QUICK_JOBS for r in rows)


def test_a_quick_group_outcomes_run_writes_each_group_acks_only_and_mixed_both_ways(
    tmp_path: Path,
) -> None:
    report = tmp_path / "groups.json"
    script = str(RUN.parent / "bench_group_outcomes.py")
    done = subprocess.run(
        [sys.executable, script, "--quick", "--engine", "sqlite", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(report.read_text(encoding="utf-8"))
    assert row["engine"] == "sqlite"
    rounds = [row[f"rounds_{side}_ms"] for side in ("acks", "mixed", "grouped")]
    assert [len(r) for r in rounds] == [1, 1, 1]
    assert row["acks_ms"] > 0
    assert row["mixed_ms"] > 0
    assert row["grouped_ms"] > 0
    assert "per retry/fail beyond an ack: each, grouped" in done.stdout


def test_bench_limits_refuses_durable_on_an_engine_without_a_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_limits.main(["sqlite", "--durable"])
    assert exit_info.value.code == 2
    assert (
        "--durable starts a PostgreSQL cluster; engine 'sqlite' has none" in capsys.readouterr().err
    )


def test_bench_limits_refuses_a_job_count_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_limits.main(["sqlite", "0"])
    assert exit_info.value.code == 2
    assert "JOBS must be at least 1, not 0" in capsys.readouterr().err
