"""Issue 30, attack round 6, findings on trust and compiled code (decision 0050): trust is
pinned to the code that runs, and compiled code never stands in for the reviewed source.

Properties searched with hypothesis over real files in a temporary directory: any change
to any byte of any file of a plugin's package (or a file added, removed or renamed)
changes its pin (``provenance.code_digest``), and nothing in ``__pycache__`` does; for any
cached ``.pyc`` (timestamp, checked or unchecked hash, of the source's code or of other
code, its header forged to match the source or not), either the import system would run
the source's own code or ``provenance.compiled_problem`` refuses the plugin (and refuses
no ``.pyc`` that is the source's compilation); the plugin process's source-only finder
(``guest._source_only``) runs the source's code whatever ``.pyc`` lies beside it.  The
end-to-end routes (real pip installs, the sandbox, a trusted instance) are in
tests/plugins/test_hostile_plugin_distributions.py.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import tempfile
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.plugins import provenance

#: Paths of a plugin package's files (``good``), its ``__pycache__`` left out.
_PATHS = ["good/__init__.py", "good/a.py", "good/sub/__init__.py", "good/sub/b.py",
          "good/data.json", "good/sub/deep/c.txt"]  # fmt: skip

_packages = st.dictionaries(
    st.sampled_from(_PATHS), st.binary(max_size=40), min_size=1, max_size=len(_PATHS)
)


def _write(root: Path, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _mutations(files: dict[str, bytes]) -> st.SearchStrategy[dict[str, bytes]]:
    """Another package: one byte of one file changed, a byte added or removed, a file
    removed, added or renamed."""
    names = sorted(files)

    def flip(name: str, position: int, value: int) -> dict[str, bytes]:
        data = bytearray(files[name])
        if not data:
            return {**files, name: bytes([value])}
        index = position % len(data)
        data[index] = data[index] ^ (value or 1)
        return {**files, name: bytes(data)}

    def removed(name: str) -> dict[str, bytes]:
        return {k: v for k, v in files.items() if k != name}

    def renamed(name: str, to: str) -> dict[str, bytes]:
        return {**removed(name), to: files[name]}

    def shortened(name: str) -> dict[str, bytes]:
        return {**files, name: files[name][:-1]} if files[name] else removed(name)

    free = [p for p in _PATHS if p not in files] + ["good/new.py"]
    return st.one_of(
        st.builds(flip, st.sampled_from(names), st.integers(0, 64), st.integers(0, 255)),
        st.builds(
            lambda n, b: {**files, n: files[n] + b},
            st.sampled_from(names),
            st.binary(min_size=1, max_size=3),
        ),  # fmt: skip
        st.builds(shortened, st.sampled_from(names)),
        st.builds(lambda n, d: {**files, n: d}, st.sampled_from(free), st.binary(max_size=8)),
        st.builds(renamed, st.sampled_from(names), st.sampled_from(free)),
    )


@given(st.data())
def test_any_change_to_any_byte_of_any_file_of_the_package_changes_the_pin(data):
    files = data.draw(_packages)
    changed = data.draw(_mutations(files))
    with tempfile.TemporaryDirectory() as before, tempfile.TemporaryDirectory() as after:
        _write(Path(before), files)
        _write(Path(after), changed)
        pin = provenance.code_digest(before, "good")
        assert len(pin) == 64 and pin == provenance.code_digest(before, "good")
        if changed != files:
            assert provenance.code_digest(after, "good") != pin
        # Compiled code and other packages' files are not the plugin's code: no change.
        _write(Path(before), {"good/__pycache__/a.cpython-311.pyc": data.draw(st.binary()),
                              "good/sub/__pycache__/x.pyc": b"x", "other/m.py": b"y"})  # fmt: skip
        assert provenance.code_digest(before, "good") == pin


def test_the_pin_memo_sees_a_change_that_keeps_size_and_modification_time(tmp_path):
    """The per-file hash memo is keyed by each file's identity: a rewrite that keeps its
    size and sets its modification time back still changes its change time (which no user
    can set), so the pin changes; a file changed within ``SETTLE_NS`` is never memoized."""
    _write(tmp_path, {"good/__init__.py": b"ANSWER = 'reviewed'\n"})
    source = tmp_path / "good" / "__init__.py"
    fresh = provenance.code_digest(str(tmp_path), "good")
    assert not any(key[0] == str(source) for key in provenance._hashes)  # racily clean
    time.sleep(provenance.SETTLE_NS / 1e9 + 0.1)
    pin = provenance.code_digest(str(tmp_path), "good")
    assert pin == fresh and any(key[0] == str(source) for key in provenance._hashes)
    info = os.stat(source)
    source.write_bytes(b"ANSWER = 'rewrite!'\n")  # the same size
    os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert os.stat(source).st_size == info.st_size
    assert provenance.code_digest(str(tmp_path), "good") != pin


def _pyc(code: object, flags: int, header: bytes) -> bytes:
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + header + marshal.dumps(code)


_KINDS = ["timestamp", "checked", "unchecked", "bad-magic", "bad-flags"]


def _cached(directory: Path, reviewed: int, hidden: int, kind: str, forged: bool) -> Path:
    """``m.py`` (``X = reviewed``) and, where the import system looks for its cache, a
    .pyc of ``X = hidden`` of ``kind``, its header made to match the source (``forged``)
    or not."""
    source = directory / "m.py"
    text = f"X = {reviewed}\n".encode()
    source.write_bytes(text)
    code = compile(f"X = {hidden}\n", str(source), "exec", dont_inherit=True)
    info = os.stat(source)
    if kind in ("timestamp", "bad-magic", "bad-flags"):
        mtime = int(info.st_mtime) + (0 if forged else 1)
        header = (mtime & 0xFFFFFFFF).to_bytes(4, "little") + info.st_size.to_bytes(4, "little")
        data = _pyc(code, {"bad-flags": 0b100}.get(kind, 0), header)
        if kind == "bad-magic":
            data = b"\x00\x00\r\n" + data[4:]
    else:
        checked = importlib.util.source_hash(text if forged else f"X = {hidden}\n".encode())
        data = _pyc(code, 0b11 if kind == "checked" else 0b01, checked)
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir(exist_ok=True)
    cached.write_bytes(data)
    return source


def _runs(source: Path):
    """What ``X`` is once the import system's own loader for ``source`` has run it."""
    namespace: dict[str, object] = {}
    exec(SourceFileLoader("m", str(source)).get_code("m"), namespace)
    return namespace["X"]


@given(
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(_KINDS),
    st.booleans(),
)
def test_a_pyc_never_changes_what_runs(reviewed, hidden, kind, forged):
    with tempfile.TemporaryDirectory() as tmp:
        source = _cached(Path(tmp), reviewed, hidden, kind, forged)
        problem = provenance.compiled_problem(tmp, "m")
        # The plugin process's finder compiles the source, whatever lies beside it.
        from django_webfetch.plugins.runtime import guest

        hooks = list(sys.path_hooks)
        try:
            spec = guest._source_only(tmp, "m").find_spec("m")
            namespace: dict[str, object] = {}
            exec(spec.loader.get_code("m"), namespace)
            assert namespace["X"] == reviewed
        finally:
            sys.path_hooks[:] = hooks
        # Accepted: the import system runs the source's own code.  Refused: only a .pyc
        # the import system would run in its place, with other code.
        runs = _runs(source)
        assert (problem == "") == (runs == reviewed), (kind, forged, problem, runs)
        if problem:
            assert "is loaded in place of that source and is not its compilation" in problem


@pytest.mark.parametrize(
    "files",
    [
        {"good/__init__.py": b"", "good/helper.pyc": b"sourceless"},
        {"good/__init__.py": b"", "good/sub/x.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"},
        {"good/__init__.py": b"", "good/x.pyd": b"MZ"},
        {"good/__init__.py": b"", "good.abi3.so": b"\x7fELF"},
        {"good/main.py": b"", "good.pyc": b"sourceless"},
    ],
    ids=["sourceless", "extension", "pyd", "extension-beside", "sourceless-beside"],
)
def test_compiled_code_without_source_is_refused(tmp_path, files):
    _write(tmp_path, files)
    problem = provenance.compiled_problem(str(tmp_path), "good")
    assert problem.startswith("it holds compiled code without reviewable source"), problem
    # A pyc in __pycache__ of the source's own code (as the import system writes) is fine.
    clean = tmp_path / "clean"
    _write(clean, {"good/__init__.py": b"X = 1\n"})
    import py_compile

    py_compile.compile(str(clean / "good" / "__init__.py"), doraise=True)
    assert provenance.compiled_problem(str(clean), "good") == ""


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["edited", "missing", "pycache"])
def test_a_plugin_whose_files_are_not_its_records_is_refused(tmp_path, registry_on, change):
    """Tampering after install is visible: a file whose bytes no longer match its
    ``RECORD`` row's hash, or a listed file that is missing, refuses the plugin
    (``plugin_distribution_unsafe``, naming the file); ``__pycache__`` rows are not
    compared (the interpreter rewrites those, and they never run in place of the source)."""
    from django_webfetch.plugins import registry
    from tests.plugins.packages import MANIFEST, wheel

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t", "webfetch_t/util.py": "X = 1\n",
           "webfetch_t/__pycache__/util.cpython-311.pyc": "not bytecode"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    package = site / "webfetch_t"
    if change == "edited":
        (package / "util.py").write_text("X = 2\n")
    elif change == "missing":
        (package / "util.py").unlink()
    else:
        (package / "__pycache__" / "util.cpython-311.pyc").write_text("rewritten")
    registry.reset()
    problems = [p for p in registry.problems() if "'t'" in p]
    if change == "pycache":
        assert registry.get_manifest("t") is not None and problems == [], problems
        return
    assert registry.get_manifest("t") is None
    assert len(problems) == 1 and "(plugin_distribution_unsafe)" in problems[0], problems
    said = "is not the file its RECORD lists" if change == "edited" else "is missing"
    assert f"'webfetch_t/util.py'{',' if change == 'missing' else ''}" in problems[0]
    assert said in problems[0], problems
