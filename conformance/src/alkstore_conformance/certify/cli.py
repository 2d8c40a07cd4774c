"""``alkstore-conformance run --engine NAME [--certify [--reduced]] [--report PATH]
[--server URL] [--property ID ...] [--profile NAME ...] [--via sync|aio]
[--time-budget SECONDS] [-- pytest args]``.

Runs pytest on the installed suite (with xdist, ``-n auto`` by default) and
exits with its exit code: non-zero unless every property that ran is pass or
not_applicable -- and, with ``--certify``, unless the run certified the
engine. Arguments the CLI does not know, and anything after ``--``, go to
pytest unchanged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from alkstore import ENGINE_GROUP

from .. import SUITE_PACKAGE, __version__
from ..helpers.via_aio import VIA_SYNC, VIAS
from ..hooks import SERVER_ENV
from .budget import DEFAULT_TIME_BUDGET_S
from .selection import suite_targets


@dataclass(frozen=True)
class RunOptions:
    """What a run asks for; ``pytest_args`` turns it into a pytest command line."""

    engine: str
    engine_group: str = ENGINE_GROUP
    report: Path | None = None
    workers: str = "auto"
    certify: bool = False
    reduced: bool = False
    trials: int | None = None
    properties: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    via: str = VIA_SYNC
    server: str | None = None
    time_budget: float | None = None


def pytest_args(options: RunOptions, extra: Sequence[str] = ()) -> list[str]:
    # A run of named properties collects only the modules declaring them; a
    # certification, and a run of profiles, the whole suite.
    partial = options.properties and not options.profiles and not options.certify
    args = [
        "--pyargs",
        *(suite_targets(options.properties) if partial else [SUITE_PACKAGE]),
        "--engine",
        options.engine,
        "--engine-group",
        options.engine_group,
        "-p",
        "no:cacheprovider",
    ]
    if options.workers != "0":
        # Work-stealing: the plugin puts one long test at the head of each worker's
        # share, and idle workers take the rest from busy ones (``plugin._long_first``).
        args += ["-n", options.workers]
        if not any(arg == "--dist" or arg.startswith("--dist=") for arg in extra):
            args += ["--dist", "worksteal"]
    if options.report is not None:
        args += ["--alkstore-report", str(options.report)]
    if options.server is not None:
        args += ["--alkstore-server", options.server]
    if options.certify:
        args.append("--alkstore-certify")
    if options.reduced:
        args.append("--alkstore-reduced")
    if options.trials is not None:
        args += ["--alkstore-trials", str(options.trials)]
    for property_id in options.properties:
        args += ["--alkstore-property", property_id]
    for profile in options.profiles:
        args += ["--alkstore-profile", profile]
    if options.via != VIA_SYNC:
        args += ["--alkstore-via", options.via]
    if options.time_budget is not None:
        args += ["--alkstore-time-budget", f"{options.time_budget:g}"]
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
        "--server",
        metavar="URL",
        help=f"the server a server engine's provision() uses: exported as ${SERVER_ENV} to "
        "every test process (its meaning is the engine's to document)",
    )
    run.add_argument(
        "--certify",
        action="store_true",
        help="certify: the long Hypothesis profile, repeated concurrency trials, no skips "
        "but not_applicable ones; exit non-zero unless certified",
    )
    run.add_argument(
        "--reduced",
        action="store_true",
        help="with --certify: the short Hypothesis profile and the minimum trials (for CI); "
        'the report says "reduced": true',
    )
    run.add_argument(
        "--trials",
        type=int,
        metavar="N",
        help="trials of each concurrency test (at least 1; 2 reduced; 3 certifying)",
    )
    run.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="ID",
        help="run only this manifest property's tests (repeatable)",
    )
    run.add_argument(
        "--profile",
        dest="profiles",
        action="append",
        default=[],
        metavar="NAME",
        help="run only the properties of this profile (repeatable; adds to --property)",
    )
    run.add_argument(
        "--via",
        choices=VIAS,
        default=VIA_SYNC,
        help="reach the engine through its sync stores (default) or through alkstore.aio "
        "(the same properties, each store call awaited on an AsyncStore)",
    )
    run.add_argument(
        "--time-budget",
        type=_seconds,
        metavar="SECONDS",
        help="every test's time budget: a test still running after it fails, and the run "
        f"goes on (default: {DEFAULT_TIME_BUDGET_S} s, more for the long properties the "
        "manifest names; 0: no budget)",
    )
    run.add_argument(
        "-n",
        "--workers",
        default="auto",
        metavar="N",
        help="xdist workers: a number, 'auto' (default) or 0 for none",
    )
    return parser


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"a number of seconds >= 0, got {text!r}")
    return seconds


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
        certify=namespace.certify,
        reduced=namespace.reduced,
        trials=namespace.trials,
        properties=tuple(namespace.properties),
        profiles=tuple(namespace.profiles),
        via=namespace.via,
        server=namespace.server,
        time_budget=namespace.time_budget,
    )
    return options, [*unknown, *passthrough]


def main(argv: Sequence[str] | None = None) -> int:
    options, extra = parse(sys.argv[1:] if argv is None else argv)
    import pytest

    return int(pytest.main(pytest_args(options, extra)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
