"""The kit's child processes start from a fork server that has the engine imported."""

from __future__ import annotations

import json
import sys
import textwrap

from kit_runs import RunIn

from alkstore_conformance.helpers.processes import child_context

TARGET = """
import os
import sys

from alkstore_conformance.helpers.processes import child_process


@child_process
def report_imported(results, module):
    return ("imported", (module in sys.modules, os.environ.get("KIT_CHILD_MARK")))
"""

PARENT = """
import json
import os

from alkstore_conformance.helpers.processes import preload_for_children
from alkstore_conformance.helpers.profiles import Children

import child_target

if __name__ == "__main__":
    preload_for_children(["alkstore_memory"])
    os.environ["KIT_CHILD_MARK"] = "set before the first child"
    with Children(60) as children:
        children.start(child_target.report_imported, children.results, "alkstore_memory")
        imported, environment = children.expect("imported")
        method = children.context.get_start_method()
        print(json.dumps({"engine imported": imported, "environment": environment,
                          "start method": method}))
"""


def test_children_fork_from_a_server_that_imported_the_engine(run_in: RunIn) -> None:
    (run_in.cwd / "child_target.py").write_text(textwrap.dedent(TARGET), encoding="utf-8")
    (run_in.cwd / "parent.py").write_text(textwrap.dedent(PARENT), encoding="utf-8")
    # parent.py's directory is first on its sys.path, and the fork server's: both
    # import child_target from it.
    result = run_in(sys.executable, "parent.py", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    # The target's module does not import the memory engine: the fork server did.
    assert json.loads(result.stdout) == {
        "engine imported": True,
        "environment": "set before the first child",
        "start method": "forkserver",
    }


def test_children_fork_where_the_platform_has_a_fork_server() -> None:
    assert child_context().get_start_method() == "forkserver"
