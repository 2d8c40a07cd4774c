"""The kit's child processes start from a fork server that has the engine imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kit_runs import kit_env

from alkstore_conformance.helpers.processes import child_context

TARGET = """
import os
import sys

from alkstore_conformance.helpers.processes import child_process


@child_process
def report_imported(results, module):
    return ("imported", [module in sys.modules, os.environ.get("KIT_CHILD_MARK")])
"""

PARENT = """
import os

from alkstore_conformance.helpers.processes import preload_for_children
from alkstore_conformance.helpers.profiles import Children

import child_target

if __name__ == "__main__":
    preload_for_children(["alkstore_memory"])
    os.environ["KIT_CHILD_MARK"] = "set before the first child"
    with Children(60) as children:
        children.start(child_target.report_imported, children.results, "alkstore_memory")
        print(children.expect("imported"), children.context.get_start_method())
"""


def test_children_fork_from_a_server_that_imported_the_engine(tmp_path: Path) -> None:
    (tmp_path / "child_target.py").write_text(textwrap.dedent(TARGET), encoding="utf-8")
    (tmp_path / "parent.py").write_text(textwrap.dedent(PARENT), encoding="utf-8")
    env = kit_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    result = subprocess.run(
        [sys.executable, str(tmp_path / "parent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The target's module does not import the memory engine: the fork server did.
    assert result.stdout.split() == [
        "[True,",
        "'set",
        "before",
        "the",
        "first",
        "child']",
        "forkserver",
    ]


def test_children_fork_where_the_platform_has_a_fork_server() -> None:
    assert child_context().get_start_method() == "forkserver"
