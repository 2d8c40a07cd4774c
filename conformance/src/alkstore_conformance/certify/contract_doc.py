"""Keep the contract document and the property manifest in step.

The contract document (``docs/contract.md`` in the repository) has one section
per area (``## §2 Queues``) and, inside each, numbered rules (``### 2.6 Claim``),
each right after an explicit anchor (``<a id="claim"></a>``). Every rule ends
with a block naming the properties that check it::

    <!-- properties: QUEUE-CLAIM-ORDER QUEUE-CLAIM-TRANSITION -->
    ...generated from the manifest...
    <!-- end properties -->

or, for a rule no engine property can check, ``<!-- properties: none: why -->``.
Which rule a property checks is an editorial choice, so the marker line is
written by hand; everything between the marker and its end line, and the table
of sections between ``<!-- sections -->`` and ``<!-- end sections -->``, is
generated from the document and the manifest (``--write``). ``--check`` fails
when a generated part is stale or the document and the manifest disagree::

    python -m alkstore_conformance.certify.contract_doc --check docs/contract.md
    python -m alkstore_conformance.certify.contract_doc --write docs/contract.md
    python -m alkstore_conformance.certify.contract_doc --list docs/contract.md
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from alkstore import Capabilities
from alkstore.constants import CONTRACT_VERSION

from .manifest import (
    ASYNC_PROFILE,
    CORE_PROFILE,
    WORKER_PROFILE,
    Manifest,
    ManifestError,
    load_manifest,
    parse_manifest,
)

DEFAULT_DOCUMENT = Path("docs") / "contract.md"

_VERSION = re.compile(r"Contract version: \*\*(?P<version>[0-9]+\.[0-9]+)\*\*")
_SECTION = re.compile(r"## §(?P<number>[0-9]+) (?P<title>\S.*)")
_RULE = re.compile(r"### (?P<section>[0-9]+)\.(?P<rule>[0-9]+) (?P<title>\S.*)")
_ANCHOR = re.compile(r'<a id="(?P<anchor>[^"]*)"></a>')
_ANCHOR_SHAPE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_BLOCK_START = re.compile(r"<!-- properties: (?P<body>.*?) -->")
_BLOCK_END = "<!-- end properties -->"
_TABLE_START = "<!-- sections -->"
_TABLE_END = "<!-- end sections -->"
_NONE = re.compile(r"none: (?P<reason>\S.*)")
_PROPERTY_ID = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+")
_CITED_ID = re.compile(r"`(?P<id>[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+)`")

# Profiles in the order the sections table lists them: the core first, then the
# optional profiles in the order ``Capabilities`` declares them.
_PROFILE_ORDER = (
    CORE_PROFILE,
    *(f.name for f in fields(Capabilities)),
    WORKER_PROFILE,
    ASYNC_PROFILE,
)


class ContractDocError(ValueError):
    """The document cannot be read or written (a missing file, an unreadable manifest)."""


@dataclass(frozen=True, slots=True)
class Section:
    number: int
    title: str
    anchor: str


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``### n.m`` rule and the properties its marker names."""

    section: int
    number: str
    title: str
    anchor: str
    properties: tuple[str, ...]
    unchecked_because: str | None
    """Why no engine property checks this rule (``<!-- properties: none: ... -->``)."""
    marker_line: int | None
    """The line of the rule's properties marker (1-based), if it has one."""


@dataclass(frozen=True, slots=True)
class ContractDocument:
    version: str | None
    sections: tuple[Section, ...]
    rules: tuple[Rule, ...]
    cited: frozenset[str]
    """Property-shaped ids the prose cites in backticks, outside the generated parts."""
    problems: tuple[str, ...]
    """What is wrong with the document's own structure."""

    def rules_of(self, section: int) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.section == section)

    def named(self) -> set[str]:
        return {prop for rule in self.rules for prop in rule.properties}


class _Reader:
    """Walks the document once, collecting its outline and structural problems."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.sections: list[Section] = []
        self.rules: list[Rule] = []
        self.cited: set[str] = set()
        self.problems: list[str] = []
        self.anchors: dict[str, int] = {}
        self.pending_anchor: tuple[str, int] | None = None
        self.rule_numbers: set[str] = set()
        self.open_rule: _OpenRule | None = None

    def take_anchor(self, what: str, line_no: int) -> str:
        if self.pending_anchor is None or self.pending_anchor[1] != line_no - 1:
            self.problems.append(f"line {line_no}: {what} has no <a id=...> on the line before")
            return ""
        return self.pending_anchor[0]

    def close_rule(self) -> None:
        rule = self.open_rule
        if rule is None:
            return
        if rule.marker_line is None:
            self.problems.append(
                f"line {rule.line}: rule {rule.number} has no <!-- properties: ... --> marker"
            )
        self.rules.append(
            Rule(
                rule.section,
                rule.number,
                rule.title,
                rule.anchor,
                rule.properties,
                rule.unchecked_because,
                rule.marker_line,
            )
        )
        self.open_rule = None


@dataclass
class _OpenRule:
    """A rule while the reader is still inside it (its marker may follow)."""

    section: int
    number: str
    title: str
    anchor: str
    line: int
    properties: tuple[str, ...] = ()
    unchecked_because: str | None = None
    marker_line: int | None = None


def parse_document(text: str) -> ContractDocument:
    """The outline of a contract document; structural problems are collected, not raised."""
    reader = _Reader()
    in_block = False
    in_table = False
    opened_at = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        if in_block or in_table:
            if line == _BLOCK_END and in_block:
                in_block = False
            elif line == _TABLE_END and in_table:
                in_table = False
            elif _written_by_hand(line):
                reader.problems.append(_unclosed(opened_at, in_block, line_no))
                in_block = in_table = False
                _read_line(reader, line, line_no)
            continue
        _read_line(reader, line, line_no)
        in_block = _BLOCK_START.fullmatch(line) is not None
        in_table = line == _TABLE_START
        opened_at = line_no
    if in_block:
        reader.problems.append(f"a properties block is not closed with {_BLOCK_END!r}")
    if in_table:
        reader.problems.append(f"the sections table is not closed with {_TABLE_END!r}")
    reader.close_rule()
    if reader.version is None:
        reader.problems.append("the document states no 'Contract version: **X.Y**' line")
    elif reader.version.split(".")[0] != CONTRACT_VERSION.split(".")[0]:
        reader.problems.append(
            f"the document is contract {reader.version}, alkstore implements {CONTRACT_VERSION}"
        )
    for section in reader.sections:
        if not any(rule.section == section.number for rule in reader.rules):
            reader.problems.append(f"§{section.number} has no numbered rule")
    return ContractDocument(
        version=reader.version,
        sections=tuple(reader.sections),
        rules=tuple(reader.rules),
        cited=frozenset(reader.cited),
        problems=tuple(reader.problems),
    )


def _written_by_hand(line: str) -> bool:
    """A line no generated part ever holds: seen inside one, that part was never closed."""
    return (
        line.startswith("#")
        or _ANCHOR.fullmatch(line) is not None
        or _BLOCK_START.fullmatch(line) is not None
        or line == _TABLE_START
    )


def _unclosed(opened_at: int, block: bool, line_no: int) -> str:
    what, end = ("properties block", _BLOCK_END) if block else ("sections table", _TABLE_END)
    return f"the {what} opened at line {opened_at} is not closed with {end!r} before line {line_no}"


def _read_line(reader: _Reader, line: str, line_no: int) -> None:
    if (anchor := _ANCHOR.fullmatch(line)) is not None:
        _read_anchor(reader, anchor["anchor"], line_no)
    elif (version := _VERSION.fullmatch(line)) is not None:
        reader.version = version["version"]
    elif (section := _SECTION.fullmatch(line)) is not None:
        reader.close_rule()
        number = int(section["number"])
        if any(known.number == number for known in reader.sections):
            reader.problems.append(f"line {line_no}: §{number} appears twice")
        anchor_id = reader.take_anchor(f"§{number}", line_no)
        reader.sections.append(Section(number, section["title"], anchor_id))
    elif (rule := _RULE.fullmatch(line)) is not None:
        reader.close_rule()
        _read_rule(reader, rule, line_no)
    elif (block := _BLOCK_START.fullmatch(line)) is not None:
        _read_marker(reader, block["body"], line_no)
    else:
        reader.cited.update(match["id"] for match in _CITED_ID.finditer(line))


def _read_anchor(reader: _Reader, anchor: str, line_no: int) -> None:
    if not _ANCHOR_SHAPE.fullmatch(anchor):
        reader.problems.append(f"line {line_no}: anchor {anchor!r} is not lowercase-hyphenated")
    if anchor in reader.anchors:
        reader.problems.append(
            f"line {line_no}: anchor {anchor!r} is already used on line {reader.anchors[anchor]}"
        )
    reader.anchors[anchor] = line_no
    reader.pending_anchor = (anchor, line_no)


def _read_rule(reader: _Reader, rule: re.Match[str], line_no: int) -> None:
    number = f"{rule['section']}.{rule['rule']}"
    section = int(rule["section"])
    if not reader.sections or reader.sections[-1].number != section:
        reader.problems.append(f"line {line_no}: rule {number} is not inside §{section}")
    if number in reader.rule_numbers:
        reader.problems.append(f"line {line_no}: rule {number} appears twice")
    reader.rule_numbers.add(number)
    anchor = reader.take_anchor(f"rule {number}", line_no)
    reader.open_rule = _OpenRule(section, number, rule["title"], anchor, line_no)


def _read_marker(reader: _Reader, body: str, line_no: int) -> None:
    rule = reader.open_rule
    if rule is None:
        reader.problems.append(f"line {line_no}: a properties marker outside any rule")
        return
    if rule.marker_line is not None:
        reader.problems.append(f"line {line_no}: rule {rule.number} has a second marker")
        return
    rule.marker_line = line_no
    if (unchecked := _NONE.fullmatch(body)) is not None:
        rule.unchecked_because = unchecked["reason"]
        return
    ids = tuple(body.split())
    malformed = [prop for prop in ids if not _PROPERTY_ID.fullmatch(prop)]
    if not ids or malformed:
        reader.problems.append(
            f"line {line_no}: the marker of rule {rule.number} must list property ids"
            f" or say 'none: <why>', got {body!r}"
        )
    if len(set(ids)) != len(ids):
        reader.problems.append(f"line {line_no}: rule {rule.number} names an id twice")
    rule.properties = tuple(prop for prop in ids if _PROPERTY_ID.fullmatch(prop))


# -- the cross-check ---------------------------------------------------------


def check(text: str, manifest: Manifest) -> list[str]:
    """Every way ``text`` disagrees with ``manifest`` or with itself; empty when in step."""
    document = parse_document(text)
    problems = list(document.problems)
    sections = {section.number for section in document.sections}
    named = document.named()
    for prop in manifest.values():
        if int(prop.contract.removeprefix("§")) not in sections:
            problems.append(
                f"{prop.id}: the manifest cites {prop.contract}, which the document lacks"
            )
        elif prop.id not in named:
            problems.append(
                f"{prop.id}: in the manifest ({prop.contract}) but named under no rule of the"
                " document; add it to the marker of the rule it checks"
            )
        elif not any(prop.id in rule.properties for rule in _rules_in(document, prop.contract)):
            problems.append(
                f"{prop.id}: the manifest puts it in {prop.contract}, but no rule of"
                f" {prop.contract} names it"
            )
    for rule in document.rules:
        problems.extend(
            f"rule {rule.number} names {prop}, which the manifest lacks"
            for prop in rule.properties
            if prop not in manifest
        )
    problems.extend(
        f"the prose cites `{prop}`, which the manifest lacks"
        for prop in sorted(document.cited - set(manifest))
    )
    for section in document.sections:
        if not any(rule.properties for rule in document.rules_of(section.number)):
            problems.append(f"§{section.number} {section.title}: no property checks any rule")
    try:
        stale = render(text, manifest) != text
    except ContractDocError:
        stale = False  # an unclosed part: already among the document's problems
    if stale:
        problems.append(
            "the generated parts are stale; run"
            " `python -m alkstore_conformance.certify.contract_doc --write <document>`"
        )
    return problems


def _rules_in(document: ContractDocument, contract: str) -> tuple[Rule, ...]:
    return document.rules_of(int(contract.removeprefix("§")))


# -- the generated parts -----------------------------------------------------


def render(text: str, manifest: Manifest) -> str:
    """``text`` with every generated part rebuilt from its markers and ``manifest``.

    Raises ``ContractDocError`` for a generated part that is never closed, rather
    than replacing everything up to the next part's end line (text written by hand).
    """
    document = parse_document(text)
    rule_at = {rule.marker_line: rule for rule in document.rules if rule.marker_line is not None}
    out: list[str] = []
    skipping = block = False
    opened_at = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        if skipping:
            if line in (_BLOCK_END, _TABLE_END):
                skipping = False
                out.append(line)
            elif _written_by_hand(line):
                raise ContractDocError(
                    _unclosed(opened_at, block, line_no) + "; nothing was written"
                )
            continue
        opened_at = line_no
        out.append(line)
        if _BLOCK_START.fullmatch(line) is not None:
            out.extend(_rule_block(rule_at.get(line_no), manifest))
            skipping = block = True
        elif line == _TABLE_START:
            out.extend(_sections_table(document, manifest))
            skipping, block = True, False
    if skipping:
        end = _BLOCK_END if block else _TABLE_END
        raise ContractDocError(f"the part opened at line {opened_at} is never closed with {end!r}")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _rule_block(rule: Rule | None, manifest: Manifest) -> list[str]:
    if rule is None:
        return []
    if rule.unchecked_because is not None:
        return [
            "",
            f"*No engine property checks this rule:* {_inline(rule.unchecked_because)}.",
            "",
        ]
    lines = ["", "*Checked by:*", ""]
    for prop_id in rule.properties:
        prop = manifest.get(prop_id)
        if prop is None:
            lines.append(f"- `{prop_id}` (not in the manifest)")
        else:
            needs = " + ".join(prop.profiles)
            lines.append(f"- `{prop.id}` ({_inline(needs)}): {_inline(prop.title)}")
    lines.append("")
    return lines


def _sections_table(document: ContractDocument, manifest: Manifest) -> list[str]:
    lines = ["", "| § | Section | Rules | Profiles |", "| --- | --- | --- | --- |"]
    for section in document.sections:
        rules = document.rules_of(section.number)
        links = " · ".join(f"[{rule.number} {_cell(rule.title)}](#{rule.anchor})" for rule in rules)
        profiles = _section_profiles(section, rules, manifest)
        shown = ", ".join(
            f"{name} (core)" if name == CORE_PROFILE else name
            for name in _PROFILE_ORDER
            if name in profiles
        )
        lines.append(
            f"| [§{section.number}](#{section.anchor}) | {_cell(section.title)} | {links}"
            f" | {shown or 'none'} |"
        )
    lines.append("")
    return lines


def _section_profiles(section: Section, rules: Sequence[Rule], manifest: Manifest) -> set[str]:
    """The profiles of the properties the manifest puts in ``section``; for a section
    whose rules only borrow properties of other sections (errors, constants), theirs."""
    named = [manifest[prop] for rule in rules for prop in rule.properties if prop in manifest]
    home = {prop.profile for prop in named if prop.contract == f"§{section.number}"}
    return home or {prop.profile for prop in named}


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]])")


def _inline(text: str) -> str:
    """Manifest text as literal Markdown: no emphasis, no links, no raw HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|")


# -- command line ------------------------------------------------------------


def _load_manifest(path: Path | None) -> Manifest:
    if path is None:
        return load_manifest()
    try:
        return parse_manifest(path.read_text(encoding="utf-8"))
    except (OSError, ManifestError) as exc:
        raise ContractDocError(f"cannot read the manifest {path}: {exc}") from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ContractDocError(f"cannot read the contract document {path}: {exc}") from exc


def outline(text: str) -> list[str]:
    """One line per section and rule, with the properties each rule names."""
    document = parse_document(text)
    lines: list[str] = []
    for section in document.sections:
        lines.append(f"§{section.number} {section.title}  #{section.anchor}")
        for rule in document.rules_of(section.number):
            checked = " ".join(rule.properties) or f"(none: {rule.unchecked_because})"
            lines.append(f"  {rule.number} {rule.title}  #{rule.anchor}  {checked}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m alkstore_conformance.certify.contract_doc",
        description="Cross-check the contract document against the property manifest.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="fail when they disagree")
    action.add_argument("--write", action="store_true", help="regenerate the generated parts")
    action.add_argument("--list", action="store_true", help="print the sections and rules")
    parser.add_argument("document", nargs="?", type=Path, default=DEFAULT_DOCUMENT)
    parser.add_argument(
        "--manifest", type=Path, default=None, help="a manifest file (default: the shipped one)"
    )
    args = parser.parse_args(argv)
    try:
        text = _read(args.document)
        if args.list:
            print("\n".join(outline(text)))
            return 0
        manifest = _load_manifest(args.manifest)
        if args.write:
            rendered = render(text, manifest)
            if rendered != text:
                args.document.write_text(rendered, encoding="utf-8")
            text = rendered
        problems = check(text, manifest)
    except ContractDocError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"{args.document}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
