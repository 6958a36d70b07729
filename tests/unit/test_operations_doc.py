"""docs/operations.md lists every setting with its variable and default, and nothing that is not one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from engram.service.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
ROW = re.compile(r"^\| `(ENGRAM_[A-Z_]+)` \| ([^|]+) \| ([^|]+) \|$")


def shown(default: Any) -> str:
    """A default as the table writes it: `unset`, `empty`, a number without a needless `.0`, a path."""
    if default is None:
        return "unset"
    if isinstance(default, frozenset | set | list | tuple) and not default:
        return "empty"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def rows() -> dict[str, tuple[str, str]]:
    text = DOC.read_text()
    settings = text[text.index("\n## Settings\n"):]
    settings = settings[:settings.index("\n## ", 1)]
    found: dict[str, tuple[str, str]] = {}
    for line in settings.splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(1) not in found, f"{match.group(1)} twice"
            found[match.group(1)] = (match.group(2).strip(), match.group(3).strip())
    return found


def test_every_setting_is_in_the_doc_with_its_default_and_a_meaning() -> None:
    table = rows()
    fields = {f"ENGRAM_{name.upper()}": field.default for name, field in Settings.model_fields.items()}
    assert set(table) == set(fields), {"missing": set(fields) - set(table), "not settings": set(table) - set(fields)}
    for variable, default in fields.items():
        cell, meaning = table[variable]
        written = re.match(r"`([^`]*)`|(unset)", cell)
        assert written and (written.group(1) or written.group(2)) == shown(default), (variable, cell, shown(default))
        assert len(meaning) > 10, variable


def test_the_readme_points_to_the_doc() -> None:
    readme = (DOC.parents[1] / "README.md").read_text()
    assert "(docs/operations.md)" in readme
    assert "## Rotating the master key" in DOC.read_text()
