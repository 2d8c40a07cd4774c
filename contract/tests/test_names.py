"""One naming rule for every name-taking surface (contract §0, §4)."""

from __future__ import annotations

import pytest

from alkstore.constants import MAX_NAME_LENGTH, RESERVED_PREFIX
from alkstore.errors import AlkstoreError, InvalidName, ReservedName
from alkstore.names import outbox_of_queue, outbox_queue_name, validate_identifier, validate_name


def test_a_plain_name_is_returned_unchanged() -> None:
    assert validate_name("emails") == "emails"


def test_a_name_of_exactly_200_characters_is_accepted() -> None:
    name = "n" * 200
    assert MAX_NAME_LENGTH == 200
    assert validate_name(name) == name


def test_a_name_of_201_characters_is_refused() -> None:
    with pytest.raises(InvalidName):
        validate_name("n" * 201)


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(InvalidName):
        validate_name("")


def test_a_name_with_nul_is_refused() -> None:
    with pytest.raises(InvalidName):
        validate_name("a\x00b")


@pytest.mark.parametrize("value", [None, 5, b"emails", ["emails"]], ids=repr)
def test_a_non_str_name_is_refused(value: object) -> None:
    with pytest.raises(InvalidName):
        validate_name(value)


def test_invalid_name_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        validate_name("")
    assert issubclass(InvalidName, AlkstoreError)


def test_the_refusal_names_what_was_checked() -> None:
    with pytest.raises(InvalidName, match="queue name"):
        validate_name("", "queue name")


@pytest.mark.parametrize("name", [RESERVED_PREFIX, RESERVED_PREFIX + "_mine", "__alkstore:x"])
def test_a_name_under_the_reserved_prefix_is_refused_as_reserved(name: str) -> None:
    with pytest.raises(ReservedName):
        validate_name(name)


def test_reserved_name_is_an_invalid_name() -> None:
    assert issubclass(ReservedName, InvalidName)


def test_a_name_merely_resembling_the_prefix_is_accepted() -> None:
    assert validate_name("_alkstore") == "_alkstore"
    assert validate_name("x__alkstore") == "x__alkstore"


def test_validate_identifier_does_not_check_the_reserved_prefix() -> None:
    assert validate_identifier(RESERVED_PREFIX + "_scheduler", "lock") == "__alkstore_scheduler"


def test_outbox_queue_name_is_under_the_reserved_prefix() -> None:
    backing = outbox_queue_name("sync")
    assert backing.startswith(RESERVED_PREFIX)
    with pytest.raises(ReservedName):
        validate_name(backing)


def test_outbox_queue_names_differ_per_outbox_and_are_stable() -> None:
    assert outbox_queue_name("a") == outbox_queue_name("a")
    assert outbox_queue_name("a") != outbox_queue_name("b")


def test_outbox_queue_name_refuses_a_bad_outbox_name() -> None:
    with pytest.raises(InvalidName):
        outbox_queue_name("")
    with pytest.raises(ReservedName):
        outbox_queue_name(RESERVED_PREFIX + "x")


def test_a_name_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(InvalidName, match="surrogate"):
        validate_identifier("worker-\ud800", "worker_id")


def test_a_name_with_non_ascii_letters_is_accepted() -> None:
    assert validate_name("письма-é") == "письма-é"


def test_outbox_of_queue_inverts_outbox_queue_name() -> None:
    assert outbox_of_queue(outbox_queue_name("orders")) == "orders"
    assert outbox_of_queue("orders") is None
