"""Issue 30, attack 17, findings 1 and 2 fixed (decision 0054, amended): a library of a
pinned directory is never loaded by its path, whatever the pinned extension's search path
says; a pinned library is refused when an object of its ``DT_SONAME`` is loaded already from
other bytes.

One extension and two builds of its library (reviewed, and one answering 'OTHER CODE' whose
ELF constructor writes a marker file) are compiled once with a placeholder ``RUNPATH`` and
``DT_SONAME``; each example writes its own search path and name into the bytes (the dynamic
string table keeps them, NUL-terminated), installs the distribution as pip does, trusts a
plugin requiring it, replaces the library on disk after trust (as an installer writes one),
and imports the extension.  The registry, the loader, the models and the dynamic linker are
the real ones; nothing patched.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import platform

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import install_extension, linked_extension, vendored_library
from tests.plugins.test_loader_namespaces_and_vendored_libraries import trusted_dependency
from tests.plugins.test_pinned_extension_maps_hashed_bytes import _import

pytestmark = pytest.mark.django_db

_count = itertools.count()
#: Placeholders written into the built bytes, then replaced: a search path (shorter ones
#: are NUL-padded) and a library name (replaced by one of the same length).
_RUNPATH = "~" * 400
_SONAME = "libwf17~~~~~~.so"


class _Built(tuple):  # type: ignore[type-arg]
    """(extension, reviewed library, changed library, the changed build's marker file),
    shown short (hypothesis shows the arguments of a failing example)."""

    def __repr__(self) -> str:
        return "<built extension and libraries>"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    build = tmp_path_factory.mktemp("fix17elf")
    marker = build / "constructor-ran"
    extension, library = linked_extension(build / "good", _SONAME, "reviewed", _RUNPATH,
                                          new_dtags=True)  # fmt: skip
    changed = vendored_library(build / "bad", _SONAME, "OTHER CODE", marker)
    return _Built((extension, library, changed, marker))


def _written(data: bytes, placeholder: str, value: str) -> bytes:
    old, new = placeholder.encode(), value.encode()
    assert data.count(old) == 1 and len(new) <= len(old), (placeholder, value)
    return data.replace(old, new + b"\0" * (len(old) - len(new)))


def _filled(text: str, **values: str) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced (``${LIB}`` stays as it is)."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


#: Where the vendored library is installed, below the site directory.
_PLACES = ["{pkg}.libs", "{pkg}.libs/{plat}", "{pkg}", "{pkg}/_libs"]
#: The pieces a search path entry is made of: substitutions as glibc reads them (braced,
#: bare, unknown, a longer name), directories of the installed distribution, ``.``, ``..``.
_PIECES = ["$ORIGIN", "${ORIGIN}", "$PLATFORM", "${PLATFORM}", "$LIB", "${LIB}", "$ORIGINAL",
           "$FOO", "{ORIGIN}", "{site}", "{pkg}.libs", "{pkg}", "_libs", "{plat}", "..", ".",
           "/proc/self/cwd", "cwd", "root", "lib"]  # fmt: skip
_entry = st.lists(st.sampled_from(_PIECES), max_size=4).map("/".join)
_runpaths = st.lists(_entry, min_size=1, max_size=3).map(":".join)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(runpath=_runpaths, place=st.sampled_from(_PLACES),
       cwd=st.sampled_from(["library", "package", "site", "elsewhere"]))  # fmt: skip
# As auditwheel links it; the round-17 attack; an empty entry (the working directory); the
# dynamic linker's ``$ORIGIN`` (``/proc/self/fd``) led to the working directory and to ``/``.
@example(runpath="$ORIGIN/../{pkg}.libs", place="{pkg}.libs", cwd="elsewhere")
@example(runpath="{site}/{pkg}.libs/$PLATFORM", place="{pkg}.libs/{plat}", cwd="elsewhere")
@example(runpath="{site}/{pkg}.libs/${LIB}", place="{pkg}.libs/{plat}", cwd="elsewhere")
@example(runpath="$ORIGIN/nowhere::", place="{pkg}.libs", cwd="library")
@example(runpath="$ORIGIN/../cwd", place="{pkg}.libs", cwd="library")
@example(runpath="$ORIGIN/../root{site}/{pkg}.libs", place="{pkg}.libs", cwd="elsewhere")
def test_no_library_of_a_pinned_directory_is_loaded_by_its_path(
    tmp_path, built, runpath, place, cwd
):
    """Whatever the extension's ``RUNPATH`` (``$ORIGIN``, ``$PLATFORM``, ``$LIB`` bare or
    braced, unknown substitutions, empty entries, relative entries, ``..``, the site's
    absolute directories, ``/proc/self/cwd``), wherever its vendored library is installed
    and whatever the working directory: once the library was replaced on disk after trust,
    importing the extension never runs the replacement (its answer, its ELF constructor):
    the library is served from its hashed descriptor (then refused: its bytes are not the
    pinned ones) or the import is refused, or the library is found nowhere."""
    extension, library, changed, marker = built
    k = next(_count)
    dist, package = f"wf17rp-{k}", f"wf17rp_{k}"
    site = tmp_path / f"site{k}"
    plat = platform.machine()
    soname = f"libwf17{k:06d}.so"
    value = _filled(runpath, site=str(site), pkg=package, plat=plat)
    library_at = f"{_filled(place, pkg=package, plat=plat)}/{soname}"
    install_extension(site, dist, package,
                      _written(_written(extension, _RUNPATH, value), _SONAME, soname),
                      _written(library, _SONAME, soname), library_at)  # fmt: skip
    here = os.getcwd()
    with trusted_dependency(site, f"rp{k}", package, dist):
        fresh = site / f"{library_at}.new"
        fresh.write_bytes(_written(changed, _SONAME, soname))
        fresh.replace(site / library_at)
        try:
            os.chdir({"library": (site / library_at).parent, "package": site / package,
                      "site": site, "elsewhere": tmp_path}[cwd])  # fmt: skip
            answer = _import(f"{package}._speed")
        finally:
            os.chdir(here)
    ran = marker.read_text() if marker.exists() else ""
    marker.unlink(missing_ok=True)
    assert "OTHER CODE" not in answer and not ran, (value, place, cwd, answer, ran)
    assert answer.startswith("refused:"), answer


@pytest.mark.parametrize("case", ["same", "other", "system"])
def test_a_library_is_refused_when_its_name_is_loaded_already_from_other_bytes(
    tmp_path, built, case
):
    """Two trusted plugins' extensions, each vendoring a library of the same ``DT_SONAME``
    (the first imported first): when the second's library is the same bytes, its
    extension imports and answers from them; when it is other bytes, the dynamic linker
    would bind the second extension to the first's library, and the import is refused
    (``plugin_code_changed``) before anything of it is mapped.  A vendored library named
    as one the site loaded itself (``libz.so.1``, which the ``zlib`` module links) is
    refused too: the extension would be bound to the site's."""
    import zlib

    assert zlib.crc32(b"") == 0  # libz.so.1 is loaded in this process
    extension, library, _changed, _marker = built
    soname = "libz.so.1" if case == "system" else f"libwf17{next(_count):06d}.so"
    plugins = {"same": ["reviewed", "reviewed"], "other": ["reviewed", "B's"],
               "system": ["reviewed"]}[case]  # fmt: skip
    answers = []
    with contextlib.ExitStack() as stack:
        for answer in plugins:
            k = next(_count)
            dist, package = f"wf17so-{k}", f"wf17so_{k}"
            site = tmp_path / f"site{k}"
            own = library
            if answer != "reviewed":
                own = vendored_library(tmp_path / f"build{k}", _SONAME, answer)
            runpath = f"$ORIGIN/../{package}.libs"
            linked = _written(_written(extension, _RUNPATH, runpath), _SONAME, soname)
            install_extension(site, dist, package, linked, _written(own, _SONAME, soname),
                              f"{package}.libs/{soname}")  # fmt: skip
            stack.enter_context(trusted_dependency(site, f"so{k}", package, dist))
            answers.append(_import(f"{package}._speed"))
    accepted = {"same": ["reviewed", "reviewed"], "other": ["reviewed"], "system": []}[case]
    assert answers[: len(accepted)] == accepted, answers
    for refused in answers[len(accepted) :]:
        assert refused.startswith("refused:plugin_code_changed"), answers
        assert "loaded in this process already" in refused, answers
