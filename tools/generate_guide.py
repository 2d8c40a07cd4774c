"""Generate the engine author's guide's blocks from the code, and keep every
statement of the contract version equal to ``alkstore.CONTRACT_VERSION``.

    python tools/generate_guide.py                 rewrite what is stale
    python tools/generate_guide.py --check         exit 1 naming each stale block or mention
    ... --static                                   leave the sample output alone (no kit run)
    ... --sample-from PATH                         the sample from a saved run's output

Run it with an interpreter that has ``alkstore``, ``alkstore-conformance`` and
``alkstore-memory`` installed (``.nox/lint/bin/python``, after ``nox -s lint
--install-only``).

``docs/certify-your-engine.md`` holds blocks between ``<!-- generated: NAME -->``
and ``<!-- end generated -->``; each is rendered here from what it describes:

* ``provider``: the example provider, with ``alkstore_memory.MemoryEngine``'s real
  ``Capabilities`` and ``CONTRACT_VERSION``;
* ``capabilities``: every field of ``alkstore.Capabilities`` (its docstring), the
  driver protocol of the profile (``alkstore.driver.PROFILE_DRIVERS``) and what the
  kit needs to check it (``PROFILE_NEEDS`` below: a new field fails until it has
  an entry);
* ``driver-methods``: every method of the protocols of ``alkstore.driver``;
* ``announces``: ``alkstore.driver.ANNOUNCES``;
* ``sample-output``: the run the guide shows (``alkstore-conformance run --engine
  memory --certify --reduced`` in ``scenarios/third_party_engine``), its header and
  a few rows; durations and the seed change from run to run, so ``--check``
  compares everything else.

``VERSION_MENTIONS`` are the forms in which the docs state the current contract
version (the changelog's entries, about earlier versions, use none of them); each
must say ``CONTRACT_VERSION``. A version bump is: change ``alkstore.constants.
CONTRACT_VERSION``, run this tool (and ``python -m alkstore_conformance.certify.
contract_doc --write docs/contract.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from alkstore import CONTRACT_VERSION, Capabilities
from alkstore import driver as seam
from alkstore_memory import MemoryEngine

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "certify-your-engine.md"
EXAMPLE_ENGINE = ROOT / "scenarios" / "third_party_engine"
SAMPLE_COMMAND = ("run", "--engine", "memory", "--certify", "--reduced")
SAMPLE_ROWS = ("ENGINE-PROVIDER-SURFACE", "QUEUE-CLAIM-EXACTLY-ONCE", "TX-ATTACH", "WORKER-SNOOZE")
"""The table rows the sample shows (the prose around it speaks of these)."""

_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[a-z-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end generated -->)",
    re.DOTALL,
)

# -- what the kit needs to check each profile -------------------------------------------

PROFILE_NEEDS: dict[str, str] = {
    "transactions": "nothing beyond the `Driver`: `store.transaction()` runs on "
    "`Driver.transaction()`",
    "sql": "`tx.connection` (`Driver.native_connection`) offers what "
    '["The sql profile\'s connection"](#the-sql-profiles-connection) lists',
    "attach": "`Driver.attach(native)` and the provider's `native_connection_factory(spec)` "
    "hook ([Attach](#attach)); without the hook the attach properties are not_applicable",
    "locks": "nothing beyond the `Driver`'s `lock_*` methods (every driver has them)",
    "multi_process": "specs that a spawned child reopens with `alkstore.load_engine(name)"
    ".open(spec.url, **spec.opts)`; other processes' commits reported to the "
    "`start_watching` sink",
    "scheduler": "the driver protocol's methods",
    "streams": "the driver protocol's methods",
    "pubsub": "the driver protocol's method; with `multi_process`, delivery to every "
    "process's sink",
    "ops": "the driver protocol's methods, and `errors` and `redriven_from` on job rows "
    "(`alkstore.rows.OPS_JOB_COLUMNS`)",
    "snooze": "the driver protocol's method, and `snoozes` on job rows "
    "(`alkstore.rows.SNOOZE_JOB_COLUMNS`)",
    "cron": "no statement of its own: the schedule row stores `ScheduleRecord.timezone` "
    "(default `'UTC'`) and `catch_up` (default `'all'`), takes a NULL `interval_s`, and "
    "`schedule_upsert` keeps the boundary only when both the spec and the zone are "
    "unchanged; the core computes every boundary",
    "unique": "the driver protocol's method, `unique_key` on job rows "
    "(`alkstore.rows.UNIQUE_JOB_COLUMNS`) and a hold of the key the storage itself keeps "
    "to one job per queue and key (a unique index over live holds, `INSERT ... ON CONFLICT "
    "DO NOTHING`, never a read then a write; the kit races eight processes on one key)",
    "periodic": "the driver protocol's two methods, `declared_until` on the schedule row "
    "(`ScheduleRecord.declared_until`, NULL for a schedule `schedule()` wrote) stored by "
    "`schedule_upsert` as given, and `scheduler` and `cron` (the kit declares eight "
    "processes at once and lets leases lapse on a fake clock)",
    "limits": "the driver protocol's methods (and `ops`), and a `claim` that takes at most "
    "the queue's limit less its processing rows with `deadline > now`, counted atomically "
    "with the claim (the kit races eight processes); `next_wake_at` at the limit is the "
    "earliest deadline; ack, ack_batch, bury and cancel of a limited queue announce it",
    "key_limits": "`limits`, `limit_key` on job rows (`alkstore.rows.KEY_LIMITS_JOB_COLUMNS`, "
    "stamped from `JobStamps.limit_key`), `concurrency_per_key` and `rate_per_key` stored "
    "and read back by `set_limits` and `queue_limits`, and a `claim` of a queue with a "
    "per-key limit that takes at most each key's limit less its processing rows (and its "
    "rate less its starts in the window) and serves the keys in turn after the key its last "
    "claim served (§16.10), atomically with the claim (the kit races eight processes)",
    "results": "the driver protocol's methods, `completed_retention_s`, `completed_at` and "
    "`result` on job rows (`alkstore.rows.RESULTS_JOB_COLUMNS`), completed rows kept apart "
    "from the live ones, and `ack_batch`, `get_job`, `list_jobs` and `queue_stats` that "
    "know them",
    "workers": "the driver protocol's six methods over one row per worker id (its host, "
    "pid, queues in order, start, last seen and lease end) and one count per queue and "
    "minute that a heartbeat adds to, never replaces; the lease, the lapse rule and the "
    "hour are the core's, passed in the params",
    "dependencies": "the driver protocol's method, waiting rows kept apart from the live "
    "ones, and every statement that finishes a job (ack, ack_batch, complete, every move "
    "to dead, cancel) releasing or dead-lettering the jobs waiting for it in the same "
    "atomic step (the kit acks dependencies from eight processes at once); `get_job`, "
    "`list_jobs`, `queue_stats`, `cancel` and `bury_expired` that know waiting rows; a "
    "`redrive_dependents` that reads its dependents' kept edges only once no other open "
    "redrive has moved one of them (where transactions read a snapshot: lock the "
    "dependents' dead rows, then read the edges in a later statement; the kit races two "
    "operators over a dependent's two dead dependencies)",
    "metadata": "`metadata` on job rows (`alkstore.rows.METADATA_JOB_COLUMNS`, stamped from "
    "`JobStamps.metadata`, JSON text given back unchanged) on every table a job lives in, "
    "moved with its row to dead, completed and waiting and back, and copied by a redrive",
    "async_acks": "the driver's `commit_acks_without_waiting(c)` "
    "(`alkstore.driver.AsyncAcksDriver`): the ack that follows in a write unit, or the "
    "transaction of acks it opens, commits without waiting for the disk, and nothing "
    "else does (no setting outlives that commit); an engine crash test of the engine's "
    "own that no other write is lost",
    "async_native": "the provider's `open_on_loop(url, loop, *, clock=None, **opts)` "
    "(`alkstore.AsyncNativeProvider`)",
}

# -- statements of the contract version -------------------------------------------------

VERSION_MENTIONS: tuple[re.Pattern[str], ...] = (
    re.compile(r"[Cc]ontract version:?\s+\**(?P<version>\d+(?:\.\d+)+|\d+)\b"),
    re.compile(r"CONTRACT_VERSION`?(?:\s*\|\s*|,\s*|\s*=\s*)`?\"(?P<version>[0-9.]+)\""),
    re.compile(r"`contract_version`[^`]{0,40}`\"(?P<version>[0-9.]+)\"`"),
)
VERSION_DOCS = ("README.md", "docs/**/*.md", "*/README.md", "*/*/README.md")
HISTORICAL = ("docs/decisions/",)
"""Records of past decisions: they state the version they were written against."""


def version_files() -> list[Path]:
    found = {path for pattern in VERSION_DOCS for path in ROOT.glob(pattern)}
    return sorted(
        path
        for path in found
        if ".nox" not in path.parts
        and not any(path.relative_to(ROOT).as_posix().startswith(h) for h in HISTORICAL)
    )


def version_mentions(text: str) -> Iterator[re.Match[str]]:
    for pattern in VERSION_MENTIONS:
        yield from pattern.finditer(text)


def with_current_version(text: str) -> str:
    for pattern in VERSION_MENTIONS:

        def current(match: re.Match[str]) -> str:
            start, end = match.span("version")
            whole = match.group(0)
            offset = match.start(0)
            return whole[: start - offset] + CONTRACT_VERSION + whole[end - offset :]

        text = pattern.sub(current, text)
    return text


# -- rendering ----------------------------------------------------------------------------


def _markdown(text: str) -> str:
    """A docstring's reST literals as markdown, on one line."""
    return " ".join(text.replace("``", "`").split())


_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.(\s|$)")


def first_sentence(doc: str | None) -> str:
    paragraph = (doc or "").strip().split("\n\n", 1)[0]
    flat = " ".join(paragraph.split())
    match = _SENTENCE_END.search(flat)
    return _markdown(flat[: match.start() + 1] if match else flat)


def _annotation(value: object) -> str:
    text = value if isinstance(value, str) else getattr(value, "__name__", repr(value))
    return re.sub(r"\bC(_contra)?\b", "C", text)


def signature(method: Callable[..., object]) -> str:
    sig = inspect.signature(method)
    parts: list[str] = []
    for parameter in list(sig.parameters.values())[1:]:
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in parts:
            parts.append("*")
        if parameter.name == "c" or parameter.annotation is parameter.empty:
            text = parameter.name
        else:
            text = f"{parameter.name}: {_annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            equals = "=" if text == parameter.name else " = "
            text += f"{equals}{parameter.default!r}"
        parts.append(text)
    returns = sig.return_annotation
    shown = "" if returns is sig.empty else f" -> {_annotation(returns)}"
    return f"{method.__name__}({', '.join(parts)}){shown}"


def seam_protocols() -> list[tuple[type, str]]:
    """Each protocol an engine implements, with the profile (or status) that needs it."""
    return [
        (seam.Driver, "every engine"),
        *((protocol, "optional") for protocol in seam.OPTIONAL_DRIVERS),
        *((protocol, f"profile `{name}`") for name, protocol in seam.PROFILE_DRIVERS.items()),
    ]


def render_driver_methods() -> str:
    """One list per protocol (a table cell cannot hold a ``X | None`` everywhere)."""
    lines: list[str] = []
    for protocol, needed_by in seam_protocols():
        lines += ["", f"**`{protocol.__name__}`** ({needed_by}):", ""]
        for name in seam.protocol_methods(protocol):
            method = getattr(protocol, name)
            announces = seam.ANNOUNCES.get(name)
            said = f" *Announces {announces} on commit.*" if announces else ""
            lines.append(
                f"- `{signature(method)}` — {first_sentence(inspect.getdoc(method))}{said}"
            )
    return "\n".join(lines[1:]) + "\n"


def render_announces() -> str:
    lines = [
        f"- `{name}` announces {what} (`{_topic(name)}`)" for name, what in seam.ANNOUNCES.items()
    ]
    return "\n".join(lines) + "\n"


def _topic(name: str) -> str:
    return "stream_topic(stream)" if name.startswith("stream") else "queue_topic(queue)"


def capability_docs() -> dict[str, str]:
    """``Capabilities``' ``Attributes:`` section, field by field."""
    doc = inspect.getdoc(Capabilities) or ""
    section = doc.split("Attributes:", 1)[1]
    fields: dict[str, str] = {}
    current = ""
    for line in section.splitlines():
        match = re.match(r"\s{4}(\w+): (.*)", line)
        if match:
            current = match.group(1)
            fields[current] = match.group(2)
        elif current and line.strip():
            fields[current] += " " + line.strip()
    return {name: _markdown(text) for name, text in fields.items()}


def render_capabilities() -> str:
    docs = capability_docs()
    names = [field.name for field in dataclasses.fields(Capabilities)]
    missing = [name for name in names if name not in PROFILE_NEEDS or name not in docs]
    if missing:
        raise SystemExit(
            f"Capabilities field(s) {', '.join(missing)} need an entry in PROFILE_NEEDS "
            "(tools/generate_guide.py) and in Capabilities' Attributes docstring"
        )
    defaults = Capabilities()
    lines = [
        "| field | default | the profile | driver protocol | what the kit needs to check it |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in names:
        protocol = seam.PROFILE_DRIVERS.get(name)
        if "|" in docs[name] + PROFILE_NEEDS[name]:
            raise SystemExit(f"Capabilities.{name}: a table cell cannot hold '|'")
        lines.append(
            f"| `{name}` | `{getattr(defaults, name)}` | {docs[name]} | "
            f"{f'`{protocol.__name__}`' if protocol else '—'} | {PROFILE_NEEDS[name]} |"
        )
    return "\n".join(lines) + "\n"


def render_provider() -> str:
    capabilities = MemoryEngine.capabilities
    fields = "\n".join(
        f"        {field.name}={getattr(capabilities, field.name)},"
        for field in dataclasses.fields(Capabilities)
    )
    return f'''```python
from alkstore import Capabilities, EngineSpec, InvalidOptions
from alkstore.constants import CONTRACT_VERSION, MAX_PAYLOAD_BYTES
from alkstore.core import CoreStore
from alkstore.payload import check_max_payload_bytes


class MemoryEngine:
    name = "memory"
    version = __version__
    contract_version = CONTRACT_VERSION  # the contract you implement: "{CONTRACT_VERSION}" today
    capabilities = Capabilities(  # every optional profile, True or False
{fields}
    )

    def open(self, url, *, clock=None, **opts):
        max_payload_bytes = check_max_payload_bytes(
            opts.pop("max_payload_bytes", MAX_PAYLOAD_BYTES)
        )
        if opts:  # before anything opens
            raise InvalidOptions(f"unknown memory engine option(s): {{', '.join(sorted(opts))}}")
        return CoreStore(
            MemoryDriver(database(_database_name(url))),
            clock=clock,
            capabilities=self.capabilities,  # the core serves exactly these profiles
            engine_name=self.name,
            max_payload_bytes=max_payload_bytes,
        )

    @contextmanager
    def provision(self):
        name = f"provisioned-{{uuid.uuid4().hex}}"
        try:
            yield EngineSpec(url=f"memory://{{name}}", opts={{}})
        finally:
            drop(name)


ENGINE = MemoryEngine()
```
'''


# -- the sample output --------------------------------------------------------------------

_DURATION = re.compile(r"\d+\.\d\ds$", re.MULTILINE)
_SEED = re.compile(r"(seed[ =])\d+")


def sample_lines(output: str) -> list[str]:
    """What the guide shows of a run's terminal output."""
    lines = output.splitlines()
    header = [line for line in lines if line.startswith("alkstore-conformance")]
    start = next(i for i, line in enumerate(lines) if line.startswith("property "))
    end = next(i for i, line in enumerate(lines) if line.startswith("certified: "))
    table, summary = lines[start + 1 : end + 1], []
    rows: list[str] = [lines[start]]
    wanted = set(SAMPLE_ROWS)
    shown_last = True
    for line in table:
        if line.split(" ", 1)[0] in wanted:
            rows.append(line)
            shown_last = True
        elif re.match(r"[A-Z][A-Z0-9-]+ ", line):
            if shown_last:
                rows.append("...")
            shown_last = False
        else:
            summary.append(line)
    return [f"$ alkstore-conformance {' '.join(SAMPLE_COMMAND)}", *header, "...", *rows, *summary]


def render_sample(output: str) -> str:
    return "```\n" + "\n".join(sample_lines(output)) + "\n```\n"


def run_sample() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "alkstore_conformance.certify.cli", *SAMPLE_COMMAND],
        cwd=EXAMPLE_ENGINE,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if done.returncode != 0 or "certified: true" not in done.stdout:
        raise SystemExit(
            "the example engine did not certify, so there is no sample to show:\n"
            + done.stdout[-4000:]
            + done.stderr[-4000:]
        )
    return done.stdout


def comparable(block: str) -> str:
    """A sample block without what changes from run to run."""
    return _SEED.sub(r"\1<seed>", _DURATION.sub("<duration>", block))


# -- the guide and the docs ----------------------------------------------------------------


def render_blocks(sample: str | None) -> dict[str, Callable[[], str]]:
    blocks: dict[str, Callable[[], str]] = {
        "provider": render_provider,
        "capabilities": render_capabilities,
        "driver-methods": render_driver_methods,
        "announces": render_announces,
    }
    if sample is not None:
        blocks["sample-output"] = lambda: render_sample(sample)
    return blocks


def regenerate(text: str, sample: str | None, problems: list[str], errors: list[str]) -> str:
    """``text`` with its generated blocks rendered anew: a stale block goes to
    ``problems``, a block missing or unknown to ``errors``."""
    blocks = render_blocks(sample)
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        seen.add(name)
        if name == "sample-output" and sample is None:
            return match.group(0)
        if name not in blocks:
            errors.append(f"{GUIDE.name}: unknown generated block {name!r}")
            return match.group(0)
        body = blocks[name]()
        old = match.group("body")
        stale = comparable(old) != comparable(body) if name == "sample-output" else old != body
        if stale:
            problems.append(f"{GUIDE.name}: block {name!r} is stale")
            return match.group("open") + body + match.group("close")
        return match.group(0)

    text = _BLOCK.sub(replace, text)
    for name in [*blocks, "sample-output"]:
        if name not in seen:
            errors.append(f"{GUIDE.name}: no generated block {name!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if anything is stale")
    parser.add_argument("--static", action="store_true", help="leave the sample output alone")
    parser.add_argument("--sample-from", type=Path, metavar="PATH", help="a saved run's output")
    args = parser.parse_args(argv)
    if args.static:
        sample = None
    elif args.sample_from is not None:
        sample = args.sample_from.read_text(encoding="utf-8")
    else:
        sample = run_sample()
    problems: list[str] = []
    errors: list[str] = []
    changed: dict[Path, str] = {}
    guide = GUIDE.read_text(encoding="utf-8")
    new_guide = regenerate(guide, sample, problems, errors)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    if new_guide != guide:
        changed[GUIDE] = new_guide
    for path in version_files():
        text = changed.get(path, path.read_text(encoding="utf-8"))
        for match in version_mentions(text):
            if match.group("version") != CONTRACT_VERSION:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: states contract version "
                    f"{match.group('version')!r}, alkstore.CONTRACT_VERSION is {CONTRACT_VERSION!r}"
                )
        current = with_current_version(text)
        if current != text:
            changed[path] = current
    if args.check:
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run: python tools/generate_guide.py", file=sys.stderr)
        return 1 if problems else 0
    for path, text in changed.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
