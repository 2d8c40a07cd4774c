"""The report's JSON Schema: itself valid, versioned, and documented field by field."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema

from alkstore_conformance.certify.reporting import SCHEMA_VERSION, report_schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance-report.md"


def test_the_schema_is_valid_json_schema_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(report_schema())


def test_the_schema_pins_its_version() -> None:
    schema = report_schema()
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    assert SCHEMA_VERSION == "1"


def test_every_field_of_the_schema_is_documented() -> None:
    schema = report_schema()
    documented = set(re.findall(r"`([a-z_0-9]+)`", DOC.read_text(encoding="utf-8")))
    fields = set(schema["required"])
    for nested in ("suite", "engine", "environment", "hypothesis", "trials", "time_budget"):
        fields |= set(schema["properties"][nested]["required"])
    for definition in ("property", "test", "failure"):
        fields |= set(schema["$defs"][definition]["required"])
    assert sorted(fields - documented) == []
