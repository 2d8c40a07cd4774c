"""The manifest and the tests, checked against each other (contract §10)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .manifest import Manifest


def declaration_problems(
    declared: Mapping[str, Sequence[str]], manifest: Manifest, *, complete: bool
) -> list[str]:
    """Why the declarations ``{test node id: property ids}`` do not match the manifest.

    Every test must declare exactly one known id. When ``complete`` (the whole
    suite was collected) every manifest id must also have at least one test.
    """
    problems: list[str] = []
    covered: set[str] = set()
    for nodeid, ids in declared.items():
        if not ids:
            problems.append(f'{nodeid}: declares no property; add @pytest.mark.property("ID")')
        elif len(ids) > 1:
            problems.append(f"{nodeid}: declares {len(ids)} properties {list(ids)}; exactly one")
        elif ids[0] not in manifest:
            problems.append(f"{nodeid}: property {ids[0]!r} is not in the manifest")
        else:
            covered.add(ids[0])
    if complete:
        problems.extend(
            f"manifest property {pid} has no test" for pid in manifest if pid not in covered
        )
    return problems
