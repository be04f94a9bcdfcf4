"""Every test a document names exists: a ``tests/...py::name`` reference in docs/**/*.rst (the
decision records in docs/decisions/ included) or README.md must point at a file that defines ``def
name(`` (or ``async def name(``).

House rule: every security claim of the documentation is backed by a named test, so a
reference must never dangle, and the security page must keep its references.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted((ROOT / "docs").rglob("*.rst")) + [ROOT / "README.md"]
REFERENCE = re.compile(r"(tests/[\w/.-]+?\.py)::(\w+)")


def references(path: Path) -> list[tuple[str, str]]:
    return REFERENCE.findall(path.read_text(encoding="utf-8"))


ALL = sorted(
    {
        (doc.relative_to(ROOT).as_posix(), file, name)
        for doc in DOCUMENTS
        for file, name in references(doc)
    }
)


def test_the_documents_hold_references():
    assert ALL, "no tests/...py::name reference found in docs/*.rst or README.md"


@pytest.mark.parametrize(
    ("document", "file", "name"), ALL, ids=[f"{d}:{f}::{n}" for d, f, n in ALL]
)
def test_reference_points_at_a_defined_test(document, file, name):
    path = ROOT / file
    assert path.is_file(), f"{document} names {file}, which does not exist"
    source = path.read_text(encoding="utf-8")
    definition = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", re.M)
    assert definition.search(source), f"{document} names {file}::{name}, which is not defined"


def test_the_security_page_has_at_least_15_references():
    found = references(ROOT / "docs" / "security.rst")
    assert len(found) >= 15, f"docs/security.rst has only {len(found)} test references"
