"""Issue 30: a pinned extension maps only bytes that were hashed (decision 0054, amended).

``loader._PinnedExtension`` hashes the extension and each pinned library it needs through
a descriptor, reads their ELF dynamic sections from those bytes (``plugins.elf``), and loads
them, libraries first, through ``/proc/self/fd/N`` of those descriptors: a file swapped on
disk between the hash and the load is never mapped, so its ELF constructors never run.

The race is real: the test swaps the files on disk (``os.replace``, as an installer does)
from an audit hook at the loader's first ``ctypes.dlopen``, after every hash and before
any load; the loader's checks are not touched.  The ELF reader is fuzzed with hypothesis.
"""

from __future__ import annotations

import importlib
import itertools
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins import elf
from tests.plugins.packages import cc, install_extension, linked_extension, vendored_library
from tests.plugins.test_loader_namespaces_and_vendored_libraries import trusted_dependency

_count = itertools.count()

# -- the ELF reader: a property over built objects, then over any mutation of them --------


def _build(wide: bool, big: bool, needed: list[str], soname: str | None, runpath: str | None,
           rpath: str | None, load_vaddr: int) -> bytes:  # fmt: skip
    """A minimal ELF shared object (header, PT_LOAD over the whole file at ``load_vaddr``,
    PT_DYNAMIC, a string table) naming ``needed``, ``soname``, ``runpath``, ``rpath``."""
    o = ">" if big else "<"
    ehdr = struct.Struct(o + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"))
    phdr = struct.Struct(o + ("IIQQQQQQ" if wide else "IIIIIIII"))
    dyn = struct.Struct(o + ("qQ" if wide else "iI"))
    strings = bytearray(b"\0")

    def add(text: str) -> int:
        at = len(strings)
        strings.extend(text.encode() + b"\0")
        return at

    entries = [(1, add(n)) for n in needed]
    for tag, value in ((14, soname), (29, runpath), (15, rpath)):
        if value is not None:
            entries.append((tag, add(value)))
    phoff = 16 + ehdr.size
    dynoff = phoff + 2 * phdr.size
    stroff = dynoff + (len(entries) + 3) * dyn.size
    entries += [(5, load_vaddr + stroff), (10, len(strings)), (0, 0)]
    total = stroff + len(strings)

    def ph(kind: int, offset: int, size: int) -> bytes:
        vaddr = load_vaddr + offset
        if wide:
            return phdr.pack(kind, 6, offset, vaddr, vaddr, size, size, 8)
        return phdr.pack(kind, offset, vaddr, vaddr, size, size, 6, 4)

    ident = b"\x7fELF" + bytes([2 if wide else 1, 2 if big else 1, 1]) + bytes(9)
    header = ehdr.pack(3, 62, 1, 0, phoff, 0, 0, 16 + ehdr.size, phdr.size, 2, 0, 0, 0)
    table = ph(1, 0, total) + ph(2, dynoff, len(entries) * dyn.size)
    return (ident + header + table + b"".join(dyn.pack(t, v) for t, v in entries)
            + bytes(strings))  # fmt: skip


_name = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=24)
_objects = st.builds(
    lambda wide, big, needed, soname, runpath, rpath, vaddr: (
        (wide, big, needed, soname, runpath, rpath, vaddr)
    ),
    st.booleans(),
    st.booleans(),
    st.lists(_name, max_size=5),
    st.none() | _name,
    st.none() | _name,
    st.none() | _name,
    st.integers(min_value=0, max_value=2**31),
)
_mutations = st.lists(
    st.tuples(st.integers(min_value=0, max_value=400), st.integers(0, 255)), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(made=_objects, mutations=_mutations, cut=st.none() | st.integers(0, 400),
       noise=st.none() | st.binary(max_size=300))  # fmt: skip
def test_the_elf_reader_raises_only_its_own_error_with_bounded_work(made, mutations, cut, noise):
    """Whatever the bytes (a built shared object of either class and byte order, any of its
    bytes overwritten, cut short, or plain noise): the reader gives what the built object
    names when it is untouched, and otherwise a ``Dynamic`` or an ``ElfError``, nothing else;
    its reads are bounded in number and size whatever the bytes say (no loop over a count
    the input gives beyond the reader's bounds)."""
    wide, big, needed, soname, runpath, rpath, vaddr = made
    data = _build(wide, big, needed, soname, runpath, rpath, vaddr)
    if not mutations and cut is None and noise is None:
        assert elf.parse(data) == elf.Dynamic(tuple(needed), soname, runpath, rpath)
    buffer = bytearray(noise if noise is not None else data)
    for at, value in mutations:
        if at < len(buffer):
            buffer[at] = value
    if cut is not None:
        del buffer[cut:]
    calls: list[int] = []

    def read(offset: int, size: int) -> bytes:
        assert offset >= 0 and size >= 0
        calls.append(size)
        return bytes(buffer[offset : offset + size])

    try:
        found = elf.read_dynamic(read, len(buffer))
    except elf.ElfError as exc:
        assert str(exc)  # a reason
    else:
        assert isinstance(found, elf.Dynamic)
        assert len(found.needed) <= elf.MAX_NEEDED
    assert len(calls) <= 4 + elf.MAX_NEEDED + 3
    assert all(size <= max(len(buffer), elf.MAX_STRING + 1) for size in calls)


def test_the_elf_reader_reads_a_compiled_library_and_refuses_what_is_no_shared_object(tmp_path):
    """A library the C compiler built reads as the linker wrote it; a linker script (what
    ``libc.so`` is on many systems), an empty file and a static object's bytes are refused
    with a reason."""
    (tmp_path / "a.c").write_text("#include <unistd.h>\nint wf_a(void) { return getpid(); }\n")
    out = tmp_path / "liba.so"
    subprocess.run([cc(), "-shared", "-fPIC", "-Wl,-soname,liba.so.1",
                    "-Wl,-rpath,$ORIGIN/x:/opt/y", "-Wl,--enable-new-dtags", "-o", str(out),
                    str(tmp_path / "a.c")], check=True)  # fmt: skip
    found = elf.parse(out.read_bytes())
    assert found.soname == "liba.so.1"
    assert found.runpath == "$ORIGIN/x:/opt/y"
    assert "libc.so.6" in found.needed
    for data, why in ((b"/* GNU ld script */\nGROUP ( libc.so.6 )\n", "no ELF magic"),
                      (b"", "beyond the end"),
                      (b"\x7fELF\x03\x01" + bytes(58), "class 3")):  # fmt: skip
        with pytest.raises(elf.ElfError, match=why):
            elf.parse(data)


# -- no window: files swapped between the hash and the load are never mapped --------------


def _import(name: str) -> str:
    try:
        return str(importlib.import_module(name).answer())
    except ImportError as exc:
        return f"refused:{getattr(exc, 'reason', type(exc).__name__)}:{exc}"


#: Armed by the race test: at the loader's first ``ctypes.dlopen`` (every hash made, no load
#: yet), the files are swapped on disk.  An audit hook stays for the process: disarmed, it
#: does nothing.
_race: dict[str, object] = {}


def _swap_at_dlopen(event: str, args: tuple[object, ...]) -> None:
    if event != "ctypes.dlopen" or "swaps" not in _race:
        return  # disarmed, or swapped already (the loader's later look-ups and loads)
    swaps = _race.pop("swaps")
    assert isinstance(swaps, list)
    for path, data in swaps:
        fresh = Path(f"{path}.new")
        fresh.write_bytes(data)
        os.replace(fresh, path)  # a new file at the path, as an installer writes one
    _race["swapped"] = True


sys.addaudithook(_swap_at_dlopen)


@pytest.mark.django_db
def test_an_extension_and_its_library_swapped_between_the_hash_and_the_load_never_run(
    tmp_path,
):
    """A trusted plugin's dependency: an extension and its vendored library (auditwheel's
    layout).  After the pin was taken and confirmed, both files are replaced on disk after
    the loader hashed them and before it loaded anything (a real race, the loader's own
    ``ctypes.dlopen`` its trigger), by builds whose ELF constructors write a marker file.
    The import answers from the reviewed bytes, and no constructor of the swapped bytes
    ran: nothing but the bytes hashed was mapped (before decision 0054's amendment, the
    load by path ran them and refused only afterwards).  The swapped files, imported
    again, are refused (``plugin_code_changed``) and do not run either."""
    k = next(_count)
    dist, package = f"wfelf16-{k}", f"wfelf16_{k}"
    libname = f"libwfelf16_{k}.so"
    marker = tmp_path / "constructor-ran"
    runpath = f"$ORIGIN/../{package}.libs"  # as auditwheel links it
    extension, library = linked_extension(tmp_path / "good", libname, "reviewed", runpath)
    swapped = linked_extension(tmp_path / "bad", libname, "OTHER CODE", runpath, marker)
    site = tmp_path / f"site{k}"
    target = install_extension(site, dist, package, extension, library,
                               f"{package}.libs/{libname}")  # fmt: skip
    with trusted_dependency(site, f"elf{k}", package, dist):
        _race["swaps"] = [(target, swapped[0]), (site / f"{package}.libs" / libname, swapped[1])]
        try:
            answer = _import(f"{package}._speed")
        finally:
            fired = _race.pop("swapped", False)
            _race.clear()
        assert fired, "the files were swapped between the hash and the load"
        assert not marker.exists(), marker.read_text()  # no constructor of theirs ran
        assert answer == "reviewed"
        sys.modules.pop(f"{package}._speed")
        again = _import(f"{package}._speed")
        assert again.startswith("refused:plugin_code_changed"), again
        assert not marker.exists(), marker.read_text()


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["no_soname", "planted"])
def test_a_pinned_library_that_cannot_be_loaded_from_its_hashed_bytes_is_refused(tmp_path, case):
    """A vendored library without ``DT_SONAME`` (the dynamic linker could match it to the
    extension's ``DT_NEEDED`` only by its path) is refused, not loaded by its path; a
    library of that name planted after the pin in the package's directory, where the
    extension's RUNPATH looks first (``$ORIGIN/extra``), is refused (no pin holds it),
    not passed over for the pinned one.  Either way nothing was mapped: no constructor of
    the extension's or of either library ran (each writes a marker file)."""
    k = next(_count)
    dist, package = f"wfelf16-{k}", f"wfelf16_{k}"
    libname = f"libwfelf16_{k}.so"
    marker = tmp_path / "constructor-ran"
    # Its RUNPATH looks in ``$ORIGIN/extra`` first, then where auditwheel puts the library.
    runpath = f"$ORIGIN/extra:$ORIGIN/../{package}.libs"
    extension, library = linked_extension(tmp_path / "build", libname, "reviewed", runpath,
                                          marker, soname=case != "no_soname")  # fmt: skip
    site = tmp_path / f"site{k}"
    install_extension(site, dist, package, extension, library, f"{package}.libs/{libname}")
    with trusted_dependency(site, f"elf{k}", package, dist):
        if case == "planted":
            planted = vendored_library(tmp_path / "planted", libname, "OTHER CODE", marker)
            (site / package / "extra").mkdir()
            (site / package / "extra" / libname).write_bytes(planted)
        answer = _import(f"{package}._speed")
        why = "DT_SONAME None" if case == "no_soname" else "is none the pin holds"
        assert answer.startswith("refused:plugin_code_changed") and why in answer, answer
        assert not marker.exists(), marker.read_text()
