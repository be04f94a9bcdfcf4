"""Every copy an operator makes of a data or package directory beside it is masked with it
(docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst, amended for round 26).

History: issue 30, round 26, finding 3.

A directory's copies (a ``MEDIA_ROOT``, the site's package) are its siblings named after it
as a word, in any case (``bubblewrap._of_directory``): ``media-20261207``, ``uploads-old``,
``mysite_old``, ``mysite.orig``, ``old-mysite``, ``MySite.BAK``; never a neighbour that only
starts with its name (``mysites``), nor an entry another distribution installed beside it
(``bubblewrap._directory_entries``: a dependency ``mysite_helpers`` a plugin imports).

Observed from inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``)
reading a directory a system bind holds, and through ``bubblewrap`` for many names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all, wheel

pytestmark = pytest.mark.django_db

_SECRET = "fix27b-the-sites-secret"


def test_a_dated_copy_of_the_media_root_directory_is_not_readable(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """History: issue 30, round 26, finding 3 (Low).

    The copy an operator makes before a migration or a storage move (``cp -a media
    media-20261207``, ``media_old``) beside a ``MEDIA_ROOT`` under a bound directory is
    masked with it; a neighbour that only starts with its name is not."""
    base = system_library_dir / "mysite"
    media = base / "media"
    media.mkdir(parents=True)
    (media / "invoice-42.txt").write_text(f"IBAN {_SECRET}-live\n")
    for name in ("media-20261207", "media_old", "MEDIA.bak", "old-media"):
        (base / name).mkdir()
        (base / name / "invoice-42.txt").write_text(f"IBAN {_SECRET}-copy\n")
    (base / "attack26_other.txt").write_text("control\n")
    (base / "mediafiles").mkdir()
    (base / "mediafiles" / "readme.txt").write_text("a neighbour\n")
    open_up(system_library_dir)
    settings.MEDIA_ROOT = str(media)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack26_other.txt") in seen["read"], seen  # the control
    assert str(base / "mediafiles" / "readme.txt") in seen["read"], seen  # a neighbour
    assert str(media / "invoice-42.txt") not in seen["read"], seen  # the live root: masked
    assert seen["leaked"] == [], f"a copy of the uploads is readable: {seen['leaked']}"


def test_a_dated_copy_of_the_sites_package_beside_it_is_hidden(
    system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 26, finding 3 (Low, for the site's code).

    The copy a deploy keeps of the previous release beside the site's package in a bound
    directory (``cp -a mysite mysite-20261207``, ``mysite_old``, ``old-mysite``), settings
    module and all, is hidden with it."""
    package = system_library_dir / "attack26_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    names = ["attack26_site-20261207", "attack26_site.bak", "attack26_site_old"]
    names += ["old-attack26_site", "Attack26_Site.orig"]
    for name in names:
        shutil.copytree(package, system_library_dir / name)
    (system_library_dir / "attack26_sites").mkdir()  # a neighbour
    monkeypatch.syspath_prepend(str(system_library_dir))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack26_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    real = os.path.realpath(system_library_dir)
    for name in names:
        assert os.path.join(real, name) in hidden, (name, hidden)
    assert os.path.join(real, "attack26_sites") not in hidden, hidden


#: A directory's name: a package's or a data directory's (``media``, ``uploads``).
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{1,10}", fullmatch=True).filter(
    lambda name: not name.endswith("_")
)
_SEPARATORS = ("-", "_", ".", "~", "#", " ")
_DATES = ("%Y%m%d", "%Y-%m-%d", "%Y%m%d%H%M%S", "%s", "%d.%m.%Y")
#: Dates glued to the name (``cp -a mysite mysite$(date +%F)``): a year's four digits
#: first, or a day-first date with its separators.
_GLUED_DATES = ("%Y%m%d", "%Y-%m-%d", "%Y%m%d%H%M%S", "%Y", "%d.%m.%Y", "%d-%m-%y")
_GLUED_WORDS = ("old", "bak", "backup", "orig", "copy", "save", "saved", "prev", "new")
_ENDS = ("", "2", "-1", ".tar")


@st.composite
def _copy(draw: Any) -> tuple[str, str, list[str]]:
    """(a directory's name, a copy's name of it, neighbours that are no copy of it)."""
    name = draw(_NAMES)
    moment = time.gmtime(draw(st.integers(0, 4_102_444_800)))
    separator = draw(st.sampled_from(_SEPARATORS))
    kinds = ["dated", "old", "bak", "prefixed", "editor", "numbered", "glued"]
    kind = draw(st.sampled_from(kinds))
    if kind == "dated":  # ``cp -a media media-20261207``
        copy = name + separator + time.strftime(draw(st.sampled_from(_DATES)), moment)
    elif kind == "old":  # ``mysite-old``, ``mysite_old``, ``mysite.previous``
        copy = name + separator + draw(st.sampled_from(["old", "previous", "orig", "save"]))
    elif kind == "bak":  # ``mysite.bak``, ``mysite.bak.1``, ``mysite~``
        copy = name + draw(st.sampled_from([".bak", ".bak.1", "~", ".orig", "#", ".tar"]))
    elif kind == "prefixed":  # ``old-mysite``, ``backup_mysite_20261207``
        prefix = draw(st.sampled_from(["old", "backup", "bak", "copy of"]))
        copy = prefix + separator + name + draw(st.sampled_from(["", "-1", "_20261207"]))
    elif kind == "editor":  # ``.#mysite``, ``#mysite#``
        copy = draw(st.sampled_from([".#", "#", "."])) + name + draw(st.sampled_from(["", "#"]))
    elif kind == "numbered":  # a file manager's ``mysite (1)``, ``mysite copy``
        copy = name + draw(st.sampled_from([" (1)", " copy", " 2", "-2"]))
    else:  # glued: ``mysite$(date +%F)``, ``mysite20261207``, ``mysitev41``, ``mysiteOLD``
        glued = draw(st.sampled_from(["date", "version", "word"]))
        if glued == "date":
            copy = name + time.strftime(draw(st.sampled_from(_GLUED_DATES)), moment)
        elif glued == "version":
            copy = name + "v" + str(draw(st.integers(0, 999)))
        else:
            copy = name + draw(st.sampled_from(_GLUED_WORDS)) + draw(st.sampled_from(_ENDS))
    if draw(st.booleans()):
        copy = draw(st.sampled_from([copy.upper(), copy.title(), copy.swapcase()]))
    neighbours = [name + "s", name + "2x", "x" + name, name[:-1], name + "files"]
    # Glued to the name, what is no date, version or copy word: a neighbour still.
    neighbours += [name + "2", name + "123", name + "news", name + "older", name + "video"]
    return name, copy, [n for n in neighbours if n.casefold() != name]


@hypothesis_settings(max_examples=300, deadline=None)
@given(case=_copy(), package=st.booleans())
def test_every_copy_of_a_data_or_package_directory_is_among_its_copies(
    case: tuple[str, str, list[str]], package: bool
) -> None:
    """History: issue 30, round 26, finding 3.  Over generated directory names and copies
    of them (dated with any separator, ``-old``, ``_old``, ``.bak``, ``~``, prefixed
    ``old-``, editors' and file managers' names, in any case; and, round 27, finding 2,
    a date, a version or a copy word glued to the name: ``mysite20261207``,
    ``mysitev41``, ``mysiteOLD``): each copy beside a directory is among
    ``bubblewrap.copies`` of it, and no neighbour is (one that only starts or ends with
    its name, or is shorter, or has a short number, a word or a copy word's start glued
    to it: ``media2``, ``mysite123``, ``mysitenews``, ``mysiteolder``), nor a dependency
    another distribution installed beside it (``<name>_helpers``, its ``.dist-info``)."""
    name, copy, neighbours = case
    with tempfile.TemporaryDirectory() as top:
        real = os.path.realpath(top)
        path = os.path.join(real, name)
        os.mkdir(path)
        if package:
            Path(path, "__init__.py").write_text("")
        os.mkdir(os.path.join(real, copy))
        for neighbour in neighbours:
            os.makedirs(os.path.join(real, neighbour), exist_ok=True)
        info = wheel(Path(real), f"{name}-helpers", {}, {f"{name}_helpers/__init__.py": ""})
        found = bubblewrap.copies(path)[0]
        assert os.path.join(real, copy) in found, (copy, found)
        for neighbour in neighbours:
            assert os.path.join(real, neighbour) not in found, (neighbour, found)
        assert os.path.join(real, f"{name}_helpers") not in found, found
        assert str(info) not in found, found


def test_a_copy_dated_without_a_separator_beside_the_sites_package_is_hidden(
    system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 27, finding 2 (Low).

    The copy a deploy script makes with the date or a version appended directly (``cp -a
    mysite mysite$(date +%F)``: ``mysite2026-12-07``; ``mysite$(date +%Y%m%d)``;
    ``mysiteOLD``) beside the site's package in a bound directory is hidden with it
    (``bubblewrap._GLUED_COPY``); a neighbour with a short number glued (``..._site2``)
    is not."""
    package = system_library_dir / "fix28a_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    names = ["fix28a_site2026-12-07", "fix28a_site20261207", "fix28a_siteOLD"]
    for name in names:
        shutil.copytree(package, system_library_dir / name)
    (system_library_dir / "fix28a_site2").mkdir()  # a neighbour
    monkeypatch.syspath_prepend(str(system_library_dir))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix28a_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    real = os.path.realpath(system_library_dir)
    assert os.path.join(real, "fix28a_site") in hidden, hidden  # the control
    shown = [name for name in names if os.path.join(real, name) not in hidden]
    assert shown == [], f"copies of the site's package shown in the sandbox: {shown}"
    assert os.path.join(real, "fix28a_site2") not in hidden, hidden


def test_the_sites_own_metadata_beside_its_package_is_among_its_copies(tmp_path: Path) -> None:
    """The site's own ``.dist-info`` (its ``RECORD`` lists the site's package) is among
    the package's copies, as an entry no distribution lists is: only another
    distribution's entries are left visible."""
    site = tmp_path.resolve()
    own = wheel(site, "mysite", {}, {"mysite/__init__.py": "", "mysite/settings.py": ""})
    os.mkdir(site / "mysite_old")
    found = bubblewrap.copies(str(site / "mysite"))[0]
    assert str(own) in found, found
    assert str(site / "mysite_old") in found, found


def test_a_plugin_whose_dependency_sits_beside_the_sites_package_still_runs(
    probe: Any,
    system_library_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """A package directory the sandbox binds (``site-packages``) holding the site's package
    (``pip install .``), a release's copy of it and a dependency named after it that
    another distribution installed (``fix27b_site_helpers``): the plugin imports the
    dependency and reads its metadata, and reads nothing of the site's package nor of its
    copy."""
    deps = system_library_dir / "venv" / "lib" / "site-packages"
    deps.mkdir(parents=True)
    settings_text = f"SECRET_KEY = '{_SECRET}'\n"
    wheel(deps, "fix27b-site", {}, {"fix27b_site/__init__.py": "",
                                    "fix27b_site/settings.py": settings_text})  # fmt: skip
    shutil.copytree(deps / "fix27b_site", deps / "fix27b_site-20261207")
    shutil.copytree(deps / "fix27b_site", deps / "fix27b_site_old")
    wheel(deps, "fix27b-site-helpers", {}, {"fix27b_site_helpers/__init__.py": "ANSWER = 42\n"})
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    assert os.path.realpath(deps) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix27b_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    outcome = probe(
        "import importlib.metadata, fix27b_site_helpers\n"
        "result = (fix27b_site_helpers.ANSWER,"
        " importlib.metadata.version('fix27b-site-helpers'))"
    )
    assert outcome.kind == "json", outcome
    assert "(42, '1.0')" in outcome.text, outcome.text
    seen = read_all(probe, [str(deps)], _SECRET)
    assert str(deps / "fix27b_site_helpers" / "__init__.py") in seen["read"], seen
    assert seen["leaked"] == [], f"the site's settings are readable: {seen['leaked']}"


def test_a_dependency_whose_record_names_a_file_in_a_copy_leaves_the_copy_masked(
    probe: Any,
    system_library_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """History: issue 30, round 27, finding 1 (Medium-low).

    A plugin's dependency whose wheel writes one file into the copy an operator keeps of
    the previous release (``fix28a_site_old/zz_marker.py``: pip lists it in the
    dependency's ``RECORD``) leaves the copy masked, ``settings.py`` and all: an entry
    stays visible only when other distributions' ``RECORD`` files list every file in it
    (``bubblewrap._theirs``); the dependency's own package is readable."""
    deps = system_library_dir / "venv" / "lib" / "site-packages"
    deps.mkdir(parents=True)
    settings_text = f"SECRET_KEY = '{_SECRET}'\n"
    wheel(deps, "fix28a-site", {}, {"fix28a_site/__init__.py": "",
                                      "fix28a_site/settings.py": settings_text})  # fmt: skip
    shutil.copytree(deps / "fix28a_site", deps / "fix28a_site_old")
    # The plugin's dependency, installed over the copy by pip: one marker file there.
    wheel(deps, "fix28a-helper", {}, {"fix28a_helper/__init__.py": "",
                                        "fix28a_site_old/zz_marker.py": ""})  # fmt: skip
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix28a_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(deps)], _SECRET)
    assert str(deps / "fix28a_helper" / "__init__.py") in seen["read"], seen  # control
    assert str(deps / "fix28a_site" / "settings.py") not in seen["read"], seen
    assert seen["leaked"] == [], f"the site's settings are readable: {seen['leaked']}"


def test_bytecode_written_after_the_install_leaves_a_dependency_visible_its_cache_masked(
    tmp_path: Path,
) -> None:
    """History: issue 30, round 27, finding 1.  A dependency named after the site's
    package whose ``__pycache__`` the interpreter filled after the install (``uv pip
    install`` compiles nothing; no ``RECORD`` lists the bytecode) stays visible, its
    ``__pycache__`` masked; a copy holding one unlisted file outside a ``__pycache__``, a
    link or too many entries is masked whole."""
    site = tmp_path.resolve()
    wheel(site, "mysite", {}, {"mysite/__init__.py": "", "mysite/settings.py": ""})
    files = {"mysite_helpers/__init__.py": "", "mysite_helpers/sub/__init__.py": ""}
    wheel(site, "mysite-helpers", {}, files)
    helpers = site / "mysite_helpers"
    for cache in (helpers / "__pycache__", helpers / "sub" / "__pycache__"):
        cache.mkdir()
        (cache / "__init__.cpython-311.pyc").write_bytes(b"")
    wheel(site, "linked", {}, {"mysite_linked/__init__.py": ""})
    os.symlink(site / "mysite" / "settings.py", site / "mysite_linked" / "settings.py")
    many = {f"mysite_many/m{n}.py": "" for n in range(bubblewrap._THEIRS_MAX_ENTRIES + 1)}
    wheel(site, "many", {}, many)
    wheel(site, "stray", {}, {"mysite_stray/__init__.py": ""})
    (site / "mysite_stray" / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    found = bubblewrap.copies(str(site / "mysite"))[0]
    assert str(helpers) not in found, found
    assert str(helpers / "__pycache__") in found, found
    assert str(helpers / "sub" / "__pycache__") in found, found
    assert str(site / "mysite_helpers-1.0.dist-info") not in found, found
    for name in ("mysite_linked", "mysite_many", "mysite_stray"):
        assert str(site / name) in found, (name, found)
