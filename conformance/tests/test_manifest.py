"""The shipped manifest, and what the loader refuses."""

from __future__ import annotations

import pytest

from alkstore_conformance.certify.manifest import (
    CORE_PROFILE,
    PROFILES,
    ManifestError,
    Property,
    load_manifest,
    parse_manifest,
)


def _entry(**fields: str) -> str:
    values = {"id": "QUEUE-X", "title": "t", "contract": "§2", "profile": "queues", **fields}
    return "[[property]]\n" + "".join(f'{key} = "{value}"\n' for key, value in values.items())


def test_shipped_manifest_loads_with_the_core_properties() -> None:
    manifest = load_manifest()
    for required in ("QUEUE-CLAIM-EXACTLY-ONCE", "QUEUE-NO-STRANDED-ROWS", "QUEUE-MODEL-AGREEMENT"):
        assert manifest[required].profile == CORE_PROFILE
    assert manifest["QUEUE-MODEL-AGREEMENT"].contract == "§2"


def test_shipped_manifest_profiles_are_core_or_capabilities() -> None:
    assert {prop.profile for prop in load_manifest().values()} <= PROFILES
    assert {"queues", "transactions", "attach", "locks", "multi_process"} <= PROFILES


def test_parse_reads_every_field_in_order() -> None:
    manifest = parse_manifest(_entry() + _entry(id="LOCK-Y", profile="locks", contract="§6"))
    assert list(manifest) == ["QUEUE-X", "LOCK-Y"]
    assert manifest["LOCK-Y"] == Property("LOCK-Y", "t", "§6", "locks")


def test_requires_and_time_budget_are_optional_data() -> None:
    text = _entry(id="ASYNC-T", profile="async", contract="§13")
    manifest = parse_manifest(text + 'requires = ["transactions"]\ntime_budget_s = 900\n')
    prop = manifest["ASYNC-T"]
    assert (prop.requires, prop.time_budget_s) == (("transactions",), 900)
    assert prop.profiles == ("async", "transactions")
    plain = parse_manifest(_entry())["QUEUE-X"]
    assert (plain.requires, plain.time_budget_s, plain.profiles) == ((), None, ("queues",))


def test_the_async_transaction_property_requires_transactions() -> None:
    assert load_manifest()["ASYNC-TX-ATOMIC"].profiles == ("async", "transactions")


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ('requires = ["telepathy"]\n', "unknown profile 'telepathy'"),
        ('requires = "transactions"\n', "requires is a list of profile names"),
        ('requires = ["queues"]\n', "requires repeats a profile"),
        ("time_budget_s = 0\n", "time_budget_s is a whole number >= 1"),
        ('time_budget_s = "long"\n', "time_budget_s is a whole number >= 1"),
        ("colour = 1\n", "exactly the keys"),
    ],
    ids=["unknown", "not-a-list", "repeated", "zero-budget", "text-budget", "unknown-key"],
)
def test_parse_refuses_malformed_optional_keys(extra: str, complaint: str) -> None:
    with pytest.raises(ManifestError, match=complaint):
        parse_manifest(_entry() + extra)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (_entry() + _entry(), "appears twice"),
        (_entry(id="queue-lowercase"), "is not of the form"),
        (_entry(id="SINGLEWORD"), "is not of the form"),
        (_entry(profile="telepathy"), "unknown profile"),
        (_entry(contract="2"), "is not '§N'"),
        ('[[property]]\nid = "QUEUE-X"\n', "exactly the keys"),
        (_entry(title=""), "non-empty string"),
        ("title = 'no properties'\n", "no [[property]] entries"),
        ("[[property]\n", "not valid TOML"),
    ],
    ids=[
        "duplicate",
        "lowercase-id",
        "one-word-id",
        "profile",
        "section",
        "missing-keys",
        "empty-title",
        "empty",
        "toml",
    ],
)
def test_parse_refuses_a_malformed_manifest(text: str, complaint: str) -> None:
    with pytest.raises(ManifestError, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        parse_manifest(text)
