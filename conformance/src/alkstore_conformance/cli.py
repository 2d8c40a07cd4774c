"""``alkstore-conformance run --engine NAME [--report PATH] [-- pytest args]``.

Runs pytest on the installed suite (with xdist, ``-n auto`` by default) and
exits with pytest's exit code. Arguments the CLI does not know, and anything
after ``--``, go to pytest unchanged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from alkstore import ENGINE_GROUP

from . import SUITE_PACKAGE, __version__


@dataclass(frozen=True)
class RunOptions:
    """What a run asks for; ``pytest_args`` turns it into a pytest command line.

    (``--certify`` — no skips, the long Hypothesis profile, minimum trial
    counts — will be one more field here and a few more arguments there.)
    """

    engine: str
    engine_group: str = ENGINE_GROUP
    report: Path | None = None
    workers: str = "auto"


def pytest_args(options: RunOptions, extra: Sequence[str] = ()) -> list[str]:
    args = [
        "--pyargs",
        SUITE_PACKAGE,
        "--engine",
        options.engine,
        "--engine-group",
        options.engine_group,
        "-p",
        "no:cacheprovider",
    ]
    if options.workers != "0":
        args += ["-n", options.workers]
    if options.report is not None:
        args += ["--alkstore-report", str(options.report)]
    return [*args, *extra]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="alkstore-conformance",
        description="Certify an alkstore engine against the contract.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run the conformance suite against one engine",
        description="Run the conformance suite against one engine. Unknown arguments "
        "(and anything after --) are passed to pytest.",
    )
    run.add_argument(
        "--engine",
        required=True,
        metavar="NAME",
        help="an entry-point name in the engine group, or module:object",
    )
    run.add_argument(
        "--engine-group",
        default=ENGINE_GROUP,
        metavar="GROUP",
        help=f"entry-point group to find the engine in (default {ENGINE_GROUP})",
    )
    run.add_argument("--report", type=Path, metavar="PATH", help="write the JSON report here")
    run.add_argument(
        "-n",
        "--workers",
        default="auto",
        metavar="N",
        help="xdist workers: a number, 'auto' (default) or 0 for none",
    )
    return parser


def parse(argv: Sequence[str]) -> tuple[RunOptions, list[str]]:
    argv = list(argv)
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    namespace, unknown = _parser().parse_known_args(argv)
    options = RunOptions(
        engine=namespace.engine,
        engine_group=namespace.engine_group,
        report=namespace.report,
        workers=namespace.workers,
    )
    return options, [*unknown, *passthrough]


def main(argv: Sequence[str] | None = None) -> int:
    options, extra = parse(sys.argv[1:] if argv is None else argv)
    import pytest

    return int(pytest.main(pytest_args(options, extra)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
