"""The example engine as an outside author would have it: a copy of
``scenarios/third_party_engine`` in a directory of its own, outside this
repository, under another distribution, package, entry-point and engine name
(so it can be installed next to ``alkstore-memory`` without meeting it)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scenarios" / "third_party_engine"

NAME = "memcopy"
DISTRIBUTION = "alkstore-memcopy"
PACKAGE = "alkstore_memcopy"


def _rewrite(path: Path, *replacements: tuple[str, str]) -> None:
    text = path.read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text, f"{path.name}: the example engine no longer has {old!r}"
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def copy_example_engine(parent: Path) -> Path:
    """``parent/alkstore-memcopy``: the example engine's project, renamed; its path."""
    assert not parent.resolve().is_relative_to(ROOT), "the copy must live outside the repo"
    project = parent / DISTRIBUTION
    shutil.copytree(EXAMPLE / "src" / "alkstore_memory", project / "src" / PACKAGE)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(EXAMPLE / name, project / name)
    _rewrite(
        project / "pyproject.toml",
        ('name = "alkstore-memory"', f'name = "{DISTRIBUTION}"'),
        ('memory = "alkstore_memory:ENGINE"', f'{NAME} = "{PACKAGE}:ENGINE"'),
        ('packages = ["src/alkstore_memory"]', f'packages = ["src/{PACKAGE}"]'),
    )
    _rewrite(
        project / "src" / PACKAGE / "__init__.py",
        ('SCHEME = "memory://"', f'SCHEME = "{NAME}://"'),
        ('    name = "memory"\n', f'    name = "{NAME}"\n'),
    )
    for module in (project / "src" / PACKAGE).glob("*.py"):
        text = module.read_text(encoding="utf-8")
        module.write_text(text.replace("alkstore_memory", PACKAGE), encoding="utf-8")
    return project
