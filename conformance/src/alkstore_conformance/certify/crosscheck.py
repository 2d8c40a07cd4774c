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


def dependency_problems(
    declared: Mapping[str, Sequence[str]],
    needs: Mapping[str, Sequence[str]],
    manifest: Manifest,
) -> list[str]:
    """Properties whose every test needs a profile the manifest does not declare.

    ``needs`` is ``{test node id: profiles}`` (the property's own and the test's
    ``requires`` marks). A profile every test of a property needs is the property's
    dependency, and belongs in its manifest entry (``requires``): without it, an
    engine lacking that profile would see a property that should be
    not_applicable reported as an error (a core one) or its only tests silently
    skipped. Checked only on the whole suite (a selection may cover one test).
    """
    common: dict[str, set[str]] = {}
    for nodeid, ids in declared.items():
        if len(ids) != 1 or ids[0] not in manifest:
            continue
        needed = set(needs.get(nodeid, ()))
        if ids[0] in common:
            common[ids[0]] &= needed
        else:
            common[ids[0]] = needed
    problems: list[str] = []
    for property_id, needed in common.items():
        undeclared = sorted(needed - set(manifest[property_id].profiles))
        if undeclared:
            listed = ", ".join(f'"{p}"' for p in (*manifest[property_id].requires, *undeclared))
            problems.append(
                f"manifest property {property_id}: every test needs {', '.join(undeclared)}; "
                f"declare it: requires = [{listed}]"
            )
    return problems
