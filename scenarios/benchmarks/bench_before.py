"""Plain enqueue now against the code before unique jobs landed, on each engine.

Unique jobs must cost a plain enqueue nothing (it never runs the unique
statement). This row checks it against history: ``git archive`` of
``BEFORE_UNIQUE`` (the main line just before the unique merge) into a temporary
directory, then N single enqueues without a key timed in a child process on
that tree and on this one, alternately, each round on a freshly provisioned
store. Outside a git checkout (or without the revision) the row is skipped with
the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_turns import Timing
from bench_unique import QUICK_ROUNDS, ROUNDS, SINGLE_CAP, Overhead, overhead

ROOT = Path(__file__).resolve().parents[2]
BEFORE_UNIQUE = "d48d860"
"""The main line just before ``Merge branch 'unique'`` (48bc1e6)."""
SOURCES = ("contract/src", "engines/sqlite/src", "engines/postgres/src")

CHILD = """
import json, sys, time
sys.path[:0] = json.loads(sys.argv[1])
import alkstore
provider = alkstore.load_engine(sys.argv[2])
jobs = int(sys.argv[3])
items = [{"n": n, "pad": "x" * 80} for n in range(jobs)]
with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
    queue = store.queue("bench-plain")
    queue.enqueue({"warm": True})
    started, cpu = time.perf_counter(), time.process_time()
    for item in items:
        queue.enqueue(item)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "from": alkstore.__file__}))
"""


@contextmanager
def _tree(revision: str) -> Iterator[Path | str]:
    """The sources of ``revision`` in a temporary directory, or why not (a str)."""
    with tempfile.TemporaryDirectory(prefix="alkstore-before-") as where:
        archive = Path(where) / "tree.tar"
        done = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "-o", str(archive), revision, *SOURCES],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            yield f"git archive {revision} failed: {done.stderr.strip()[:120]}"
            return
        with tarfile.open(archive) as tar:
            tar.extractall(where, filter="data")
        yield Path(where)


def _timed(paths: list[str], engine: str, jobs: int) -> Timing:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(paths), engine, str(jobs)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=600,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(result["from"]).startswith(paths[0]):
        raise RuntimeError(f"the child imported alkstore from {result['from']}, not {paths[0]}")
    return float(result["seconds"]), float(result["cpu"])


def plain_before_after(engine: str, jobs: int, quick: bool) -> Overhead | str:
    """Plain single enqueue before unique jobs (``plain_rate``) and now (``unique_rate``);
    ``cost`` is now's time over before's, minus one. A str: why the row did not run."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    single = min(jobs, SINGLE_CAP)
    now_paths = [str(ROOT / source) for source in SOURCES]
    with _tree(BEFORE_UNIQUE) as tree:
        if isinstance(tree, str):
            return tree
        before_paths = [str(tree / source) for source in SOURCES]
        before: list[Timing] = []
        after: list[Timing] = []
        for number in range(rounds):
            sides = [(before_paths, before), (now_paths, after)]
            if number % 2:
                sides.reverse()
            for paths, times in sides:
                times.append(_timed(paths, engine, single))
    return overhead(f"1 plain enqueue, {BEFORE_UNIQUE} vs now", single, before, after, "before")
