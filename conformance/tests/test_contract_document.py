"""The contract document names every property under the rule it checks, and the
cross-check catches each way the document and the manifest can drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore_conformance.certify.contract_doc import (
    ContractDocError,
    check,
    main,
    outline,
    parse_document,
    render,
)
from alkstore_conformance.certify.manifest import Manifest, load_manifest, parse_manifest

CONTRACT_DOCUMENT = Path(__file__).resolve().parent.parent.parent / "docs" / "contract.md"


def _manifest(*entries: tuple[str, str, str]) -> Manifest:
    """A manifest of (id, contract section, title) entries, all in the core profile."""
    return parse_manifest(
        "".join(
            f'[[property]]\nid = "{prop_id}"\ntitle = "{title}"\n'
            f'contract = "{section}"\nprofile = "queues"\n'
            for prop_id, section, title in entries
        )
    )


MANIFEST = _manifest(
    ("QUEUE-CLAIM-ORDER", "§2", "claims follow priority"),
    ("QUEUE-FAIL-DEAD", "§2", "fail dead-letters now"),
    ("LOCK-HOLDER", "§6", "holder reports the owner"),
)


def _rule(number: str, anchor: str, marker: str) -> str:
    return f'<a id="{anchor}"></a>\n### {number} Rule {number}\n\nText.\n\n{marker}\n'


def _document(
    *,
    queue_ids: str = "QUEUE-CLAIM-ORDER QUEUE-FAIL-DEAD",
    lock_ids: str = "LOCK-HOLDER",
    extra: str = "",
) -> str:
    """A small contract document: §2 with two rules, §6 with one; generated parts empty."""
    return (
        "# Contract\n\nContract version: **1.0**\n\n"
        "<!-- sections -->\n<!-- end sections -->\n\n"
        '<a id="s2"></a>\n## §2 Queues\n\n'
        + _rule("2.1", "claim", f"<!-- properties: {queue_ids} -->\n<!-- end properties -->")
        + _rule(
            "2.2",
            "kit",
            "<!-- properties: none: the kit checks itself -->\n<!-- end properties -->",
        )
        + '\n<a id="s6"></a>\n## §6 Locks\n\n'
        + _rule("6.1", "holder", f"<!-- properties: {lock_ids} -->\n<!-- end properties -->")
        + extra
    )


def _problems(text: str, manifest: Manifest = MANIFEST) -> list[str]:
    """Problems of ``text`` once its generated parts are written, as ``--write`` would."""
    return check(render(text, manifest), manifest)


def _one_problem_mentions(problems: list[str], *words: str) -> bool:
    return any(all(word in problem for word in words) for problem in problems)


# -- the repository's own document ------------------------------------------------


def test_the_contract_document_is_in_step_with_the_shipped_manifest() -> None:
    text = CONTRACT_DOCUMENT.read_text(encoding="utf-8")
    assert check(text, load_manifest()) == []


SECTIONS = list(range(21))
"""§0 to §19: §18 job dependencies, §19 the worker registry."""


def test_the_contract_document_has_every_section_from_0_to_19() -> None:
    document = parse_document(CONTRACT_DOCUMENT.read_text(encoding="utf-8"))
    assert [section.number for section in document.sections] == SECTIONS
    assert [section.anchor for section in document.sections] == [f"s{n}" for n in SECTIONS]


def test_the_contract_document_states_version_1_1() -> None:
    assert parse_document(CONTRACT_DOCUMENT.read_text(encoding="utf-8")).version == "1.1"


# -- what the cross-check accepts and detects -------------------------------------


def test_a_document_in_step_with_its_manifest_has_no_problem() -> None:
    assert _problems(_document()) == []


def test_outline_lists_every_section_and_rule_with_its_properties() -> None:
    lines = outline(_document())
    assert lines[0] == "§2 Queues  #s2"
    assert "  2.1 Rule 2.1  #claim  QUEUE-CLAIM-ORDER QUEUE-FAIL-DEAD" in lines
    assert "§6 Locks  #s6" in lines


def test_a_manifest_section_the_document_lacks_is_detected() -> None:
    manifest = _manifest(
        ("QUEUE-CLAIM-ORDER", "§2", "t"),
        ("QUEUE-FAIL-DEAD", "§2", "t"),
        ("LOCK-HOLDER", "§6", "t"),
        ("STREAM-WAIT", "§7", "t"),
    )
    assert _one_problem_mentions(_problems(_document(), manifest), "STREAM-WAIT", "§7", "lacks")


def test_a_section_without_any_property_is_detected() -> None:
    text = _document(lock_ids="none: nothing checks locks")
    manifest = _manifest(("QUEUE-CLAIM-ORDER", "§2", "t"), ("QUEUE-FAIL-DEAD", "§2", "t"))
    assert _one_problem_mentions(_problems(text, manifest), "§6", "no property")


def test_a_property_the_manifest_lacks_is_detected() -> None:
    text = _document(lock_ids="LOCK-HOLDER LOCK-GHOST")
    assert _one_problem_mentions(_problems(text), "LOCK-GHOST", "manifest lacks")


def test_a_property_the_prose_cites_but_the_manifest_lacks_is_detected() -> None:
    text = _document(extra="\nSee `QUEUE-RENAMED-LONG-AGO`.\n")
    assert _one_problem_mentions(_problems(text), "QUEUE-RENAMED-LONG-AGO", "prose")


def test_a_manifest_property_the_document_never_names_is_detected() -> None:
    text = _document(queue_ids="QUEUE-CLAIM-ORDER")
    assert _one_problem_mentions(_problems(text), "QUEUE-FAIL-DEAD", "named under no rule")


def test_a_property_named_only_outside_its_manifest_section_is_detected() -> None:
    text = _document(queue_ids="QUEUE-CLAIM-ORDER", lock_ids="LOCK-HOLDER QUEUE-FAIL-DEAD")
    assert _one_problem_mentions(_problems(text), "QUEUE-FAIL-DEAD", "no rule of §2")


def test_a_property_may_also_be_named_under_a_rule_of_another_section() -> None:
    assert _problems(_document(lock_ids="LOCK-HOLDER QUEUE-FAIL-DEAD")) == []


def test_a_stale_generated_part_is_detected_and_write_renders_it_again() -> None:
    fresh = render(_document(), MANIFEST)
    retitled = _manifest(
        ("QUEUE-CLAIM-ORDER", "§2", "a new title"),
        ("QUEUE-FAIL-DEAD", "§2", "t"),
        ("LOCK-HOLDER", "§6", "t"),
    )
    assert _one_problem_mentions(check(fresh, retitled), "stale")
    assert check(render(fresh, retitled), retitled) == []


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ('<a id="claim"></a>\n### 2.1', "### 2.1", "has no <a id"),
        ('<a id="holder"></a>', '<a id="claim"></a>', "already used"),
        ("<!-- properties: LOCK-HOLDER -->\n<!-- end properties -->", "", "no <!-- properties"),
        ("Contract version: **1.0**", "", "no 'Contract version"),
        ("Contract version: **1.0**", "Contract version: **7.0**", "alkstore implements"),
        ("<!-- properties: LOCK-HOLDER -->", "<!-- properties: lock holder -->", "must list"),
        ("## §6 Locks", "## §6 Locks\n### 2.9 Stray rule", "not inside §2"),
        ('<a id="s6"></a>\n## §6 Locks', '<a id="s2-again"></a>\n## §2 Again', "appears twice"),
    ],
    ids=[
        "rule-without-anchor",
        "duplicate-anchor",
        "rule-without-marker",
        "no-version",
        "wrong-major-version",
        "malformed-marker",
        "rule-outside-its-section",
        "duplicate-section",
    ],
)
def test_a_malformed_document_is_detected(old: str, new: str, complaint: str) -> None:
    text = _document()
    assert old in text
    assert _one_problem_mentions(_problems(text.replace(old, new, 1)), complaint)


def test_titles_are_rendered_as_literal_markdown() -> None:
    manifest = _manifest(
        ("QUEUE-CLAIM-ORDER", "§2", "specs like '@every <n><unit>' and run_at *ASC*"),
        ("QUEUE-FAIL-DEAD", "§2", "t"),
        ("LOCK-HOLDER", "§6", "t"),
    )
    rendered = render(_document(), manifest)
    assert r"'@every &lt;n&gt;&lt;unit&gt;' and run\_at \*ASC\*" in rendered


def test_an_unclosed_properties_block_is_detected_where_the_text_resumes() -> None:
    text = _document().replace(
        "<!-- properties: none: the kit checks itself -->\n<!-- end properties -->",
        "<!-- properties: none: the kit checks itself -->",
    )
    assert _one_problem_mentions(check(text, MANIFEST), "not closed", "before line")


def test_render_refuses_an_unclosed_block_instead_of_eating_the_text_after_it() -> None:
    text = _document().replace(
        "<!-- properties: none: the kit checks itself -->\n<!-- end properties -->",
        "<!-- properties: none: the kit checks itself -->",
    )
    with pytest.raises(ContractDocError, match="not closed"):
        render(text, MANIFEST)


def test_render_refuses_a_block_left_open_at_the_end() -> None:
    text = _document(extra="\n<!-- sections -->\n")
    with pytest.raises(ContractDocError, match="never closed"):
        render(text, MANIFEST)


# -- the command line ------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> tuple[Path, Path]:
    document = tmp_path / "contract.md"
    document.write_text(text, encoding="utf-8")
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        "".join(
            f'[[property]]\nid = "{p.id}"\ntitle = "{p.title}"\n'
            f'contract = "{p.contract}"\nprofile = "{p.profile}"\n'
            for p in MANIFEST.values()
        ),
        encoding="utf-8",
    )
    return document, manifest


def test_check_fails_on_a_stale_document_and_write_fixes_it(tmp_path: Path) -> None:
    document, manifest = _write(tmp_path, _document())
    assert main(["--check", str(document), "--manifest", str(manifest)]) == 1
    assert main(["--write", str(document), "--manifest", str(manifest)]) == 0
    assert main(["--check", str(document), "--manifest", str(manifest)]) == 0
    assert "- `LOCK-HOLDER` (queues): holder reports the owner" in document.read_text("utf-8")


def test_check_reports_problems_naming_the_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document, manifest = _write(tmp_path, render(_document(lock_ids="LOCK-GHOST"), MANIFEST))
    assert main(["--check", str(document), "--manifest", str(manifest)]) == 1
    assert f"{document}: rule 6.1 names LOCK-GHOST" in capsys.readouterr().err


def test_a_missing_document_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["--check", str(tmp_path / "absent.md")]) == 2


def test_write_leaves_a_document_with_an_unclosed_block_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _document().replace(
        "<!-- properties: none: the kit checks itself -->\n<!-- end properties -->",
        "<!-- properties: none: the kit checks itself -->",
    )
    document, manifest = _write(tmp_path, broken)
    assert main(["--write", str(document), "--manifest", str(manifest)]) == 2
    assert document.read_text("utf-8") == broken
    assert "nothing was written" in capsys.readouterr().err


def test_list_prints_the_outline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document, _ = _write(tmp_path, _document())
    assert main(["--list", str(document)]) == 0
    assert "§6 Locks  #s6" in capsys.readouterr().out
