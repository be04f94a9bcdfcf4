"""The dynamic section of an ELF shared object, read defensively (decision 0054).

A pinned extension module and the pinned libraries it links are loaded through the
descriptors their bytes were hashed from (``loader._PinnedExtension``); which libraries it
links (``DT_NEEDED``), where the dynamic linker would look for them (``DT_RUNPATH``,
``DT_RPATH``) and the name a loaded library answers to (``DT_SONAME``) are read here from
those hashed bytes.  The input is a file the pin holds, but it is parsed as untrusted: ELF32
or ELF64, little- or big-endian, every offset and count checked against the file's size and
against fixed bounds (program headers, dynamic entries, string lengths, needed names), so
that the work is bounded whatever the bytes; anything malformed raises ``ElfError`` with the
reason, and nothing else is raised (``tests/plugins/test_pinned_extension_maps_hashed_bytes.py``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["Dynamic", "ElfError", "parse", "read_dynamic"]

#: Bounds: more than these is refused as malformed (no shared object comes near them).
MAX_PHNUM = 512
MAX_DYNAMIC = 4096
MAX_STRING = 4096
MAX_NEEDED = 256

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ = 0, 1, 5, 10
_DT_SONAME, _DT_RPATH, _DT_RUNPATH = 14, 15, 29
_SINGLE = {_DT_STRTAB: "DT_STRTAB", _DT_STRSZ: "DT_STRSZ", _DT_SONAME: "DT_SONAME",
           _DT_RPATH: "DT_RPATH", _DT_RUNPATH: "DT_RUNPATH"}  # fmt: skip


class ElfError(ValueError):
    """The bytes are no ELF shared object this module reads (the message says why)."""


class Dynamic(NamedTuple):
    """What the dynamic linker reads of a shared object to link it: its ``DT_NEEDED``
    names in order, its ``DT_SONAME``, ``DT_RUNPATH`` and ``DT_RPATH`` (``None``: none)."""

    needed: tuple[str, ...]
    soname: str | None
    runpath: str | None
    rpath: str | None


#: Reads at most ``size`` bytes at ``offset`` (fewer at the end of the file).
Reader = Callable[[int, int], bytes]


class _Layout(NamedTuple):
    ehdr: struct.Struct
    phdr: struct.Struct
    dyn: struct.Struct
    #: Field positions in ``phdr``: type, offset, vaddr, filesz.
    ph: tuple[int, int, int, int]


def _layout(wide: bool, order: str) -> _Layout:
    if wide:
        return _Layout(struct.Struct(order + "HHIQQQIHHHHHH"), struct.Struct(order + "IIQQQQQQ"),
                       struct.Struct(order + "qQ"), (0, 2, 3, 5))  # fmt: skip
    return _Layout(struct.Struct(order + "HHIIIIIHHHHHH"), struct.Struct(order + "IIIIIIII"),
                   struct.Struct(order + "iI"), (0, 1, 2, 4))  # fmt: skip


def _exact(read: Reader, offset: int, size: int, what: str) -> bytes:
    data = read(offset, size)
    if len(data) != size:
        raise ElfError(f"{what} lies beyond the end of the file")
    return data


def parse(data: bytes) -> Dynamic:
    """The ``Dynamic`` of ``data``, a whole shared object's bytes."""
    return read_dynamic(lambda offset, size: data[offset : offset + size], len(data))


def read_dynamic(read: Reader, size: int) -> Dynamic:
    """The ``Dynamic`` of the shared object of ``size`` bytes that ``read`` gives;
    ``ElfError`` when it is malformed or exceeds a bound."""
    ident = _exact(read, 0, 16, "the ELF identification")
    if ident[:4] != b"\x7fELF":
        raise ElfError("it is no ELF file (no ELF magic)")
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfError(f"its ELF class {ident[4]} or data encoding {ident[5]} is unknown")
    lay = _layout(ident[4] == 2, "<" if ident[5] == 1 else ">")
    header = lay.ehdr.unpack(_exact(read, 16, lay.ehdr.size, "the ELF header"))
    phoff = header[4]
    phentsize, phnum = header[8], header[9]
    if phnum > MAX_PHNUM:
        raise ElfError(f"it has {phnum} program headers (more than {MAX_PHNUM})")
    if phnum and phentsize != lay.phdr.size:
        raise ElfError(f"its program header size {phentsize} is not {lay.phdr.size}")
    if phoff + phnum * lay.phdr.size > size:
        raise ElfError("its program headers lie beyond the end of the file")
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    table = _exact(read, phoff, phnum * lay.phdr.size, "the program headers")
    for at in range(phnum):
        fields = lay.phdr.unpack_from(table, at * lay.phdr.size)
        kind, offset, vaddr, filesz = (fields[i] for i in lay.ph)
        if offset + filesz > size:
            raise ElfError(f"a segment (type {kind}) lies beyond the end of the file")
        if kind == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == _PT_DYNAMIC:
            if dynamic is not None:
                raise ElfError("it has more than one PT_DYNAMIC")
            dynamic = (offset, filesz)
    if dynamic is None:
        raise ElfError("it has no PT_DYNAMIC (it is no dynamically linked object)")
    count = dynamic[1] // lay.dyn.size
    if count > MAX_DYNAMIC:
        raise ElfError(f"its dynamic section has {count} entries (more than {MAX_DYNAMIC})")
    entries = _exact(read, dynamic[0], count * lay.dyn.size, "the dynamic section")
    needed: list[int] = []
    single: dict[int, int] = {}
    for at in range(count):
        tag, value = lay.dyn.unpack_from(entries, at * lay.dyn.size)
        if tag == _DT_NULL:
            break
        if tag == _DT_NEEDED:
            if len(needed) >= MAX_NEEDED:
                raise ElfError(f"it needs more than {MAX_NEEDED} libraries")
            needed.append(value)
        elif tag in _SINGLE:
            if tag in single:
                raise ElfError(f"it has more than one {_SINGLE[tag]}")
            single[tag] = value
    else:
        raise ElfError("its dynamic section has no DT_NULL end")
    wanted = needed or [t for t in (_DT_SONAME, _DT_RPATH, _DT_RUNPATH) if t in single]
    if not wanted:
        return Dynamic((), None, None, None)
    if _DT_STRTAB not in single:
        raise ElfError("it names libraries or paths but has no DT_STRTAB")
    strtab = _mapped(single[_DT_STRTAB], loads)
    limit = size - strtab
    if _DT_STRSZ in single:
        limit = min(limit, single[_DT_STRSZ])

    def string(index: int) -> str:
        if index >= limit:
            raise ElfError(f"a string offset {index} lies beyond its string table")
        raw = read(strtab + index, min(MAX_STRING + 1, limit - index))
        end = raw.find(b"\0")
        if end < 0:
            raise ElfError(f"a string at {index} is unterminated or longer than {MAX_STRING}")
        return os.fsdecode(raw[:end])

    def optional(tag: int) -> str | None:
        return string(single[tag]) if tag in single else None

    return Dynamic(
        tuple(string(i) for i in needed),
        optional(_DT_SONAME),
        optional(_DT_RUNPATH),
        optional(_DT_RPATH),
    )


def _mapped(address: int, loads: list[tuple[int, int, int]]) -> int:
    """The file offset of virtual ``address`` through the ``PT_LOAD`` segments."""
    for vaddr, offset, filesz in loads:
        if vaddr <= address < vaddr + filesz:
            return offset + (address - vaddr)
    raise ElfError(f"its DT_STRTAB address {address:#x} is in no PT_LOAD segment's file bytes")
