"""Issue 30, attack round 7: ``__pycache__`` is a valid package name, so a directory of
that name is a bytecode cache only when it holds nothing but ``*.pyc`` files, directly
(``provenance.cache_problem``).  Searched with hypothesis over real files in a temporary
directory: any file put anywhere in a plugin's package tree, other than a ``.pyc`` directly
in a bytecode cache, changes the pin (``provenance.code_digest``) or refuses the plugin
(``provenance.compiled_problem``, and a digest no pin holds for); the ``.pyc`` files of a
bytecode cache at any depth change neither.  The end-to-end routes (a trusted instance of a
plugin directory, a ``RECORD`` listing a subpackage named ``__pycache__``) are in
tests/plugins/test_plugin_dirs_pyc_and_pin_memo_routes.py.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins import provenance

_BASE = {"good/__init__.py": b"X = 1\n", "good/sub/__init__.py": b""}
_DIRS = st.lists(st.sampled_from(["sub", "__pycache__", "deep"]), max_size=3)
_NAMES = st.sampled_from(
    ["m.py", "__init__.py", "m.cpython-311.pyc", "__init__.cpython-311.pyc", "x.pyc",
     "e.cpython-311-x86_64-linux-gnu.so", "data.txt", "__pycache__", ".hidden"]
)  # fmt: skip
_EXTRAS = st.lists(st.tuples(_DIRS, _NAMES), min_size=1, max_size=4)


def _write(root: Path, files: dict[str, bytes]) -> list[list[str]]:
    """``files`` written under ``root``; the parts of those that could be (a file and a
    directory of one name cannot both be)."""
    written = []
    for relative, data in files.items():
        path = root / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                continue
            path.write_bytes(data)
        except (FileExistsError, NotADirectoryError):
            continue
        written.append(relative.split("/"))
    return written


def _cache_pyc(parts: list[str]) -> bool:
    return provenance.in_cache(parts) and "__pycache__" not in parts[:-2]


@settings(max_examples=150, deadline=None)
@given(_EXTRAS)
def test_any_file_but_a_cache_pyc_changes_the_pin_or_refuses_the_plugin(extras):
    with tempfile.TemporaryDirectory() as root:
        _write(Path(root), _BASE)
        pin = provenance.code_digest(root, "good")
        assert pin == provenance.code_digest(root, "good")
        assert provenance.compiled_problem(root, "good") == ""
        files = {"/".join(["good", *dirs, name]): b"# " + name.encode() for dirs, name in extras}
        written = _write(Path(root), files)  # a base file rewritten is a change too
        # Every entry named ``__pycache__`` on disk, as a directory or a file.
        caches = [
            os.path.join(directory, name)
            for directory, dirs, names in os.walk(root)
            for name in [*dirs, *names]
            if name == "__pycache__"
        ]
        only_cache = all(_cache_pyc(p) for p in written) and not any(
            provenance.cache_problem(c) for c in caches
        )
        digest = provenance.code_digest(root, "good")
        problem = provenance.compiled_problem(root, "good")
        if only_cache:
            # Compiled code is never the pin's (the source is reviewed, and the .pyc is
            # checked against it: these are no valid bytecode).
            assert digest == pin and problem == "", (written, problem)
            return
        refused = bool(problem) and digest != provenance.code_digest(root, "good")
        changed = digest != pin and digest == provenance.code_digest(root, "good")
        assert refused or changed, (written, problem)
        if any(provenance.cache_problem(c) for c in caches):
            # Something named ``__pycache__`` that is not a bytecode cache: refused.
            assert refused and "is named as a bytecode cache but" in problem, (written, problem)


def test_a_cache_is_only_pyc_files_directly(tmp_path):
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    assert provenance.cache_problem(str(cache)) == ""  # empty
    (cache / "m.cpython-311.pyc").write_bytes(b"")
    assert provenance.cache_problem(str(cache)) == ""
    (cache / "__init__.py").write_text("")
    assert provenance.cache_problem(str(cache)) == "holds '__init__.py', not a .pyc file"
    (cache / "__init__.py").unlink()
    (cache / "d.pyc").mkdir()  # a directory, even one named like a .pyc
    assert provenance.cache_problem(str(cache)) == "holds 'd.pyc', not a .pyc file"
    (cache / "d.pyc").rmdir()
    os.symlink(tmp_path / "nowhere", cache / "l.pyc")  # dangling
    assert provenance.cache_problem(str(cache)) == "holds 'l.pyc', not a .pyc file"
    (cache / "l.pyc").unlink()
    (tmp_path / "f" / "__pycache__").parent.mkdir()
    (tmp_path / "f" / "__pycache__").write_text("")
    assert provenance.cache_problem(str(tmp_path / "f" / "__pycache__")) == "is not a directory"
