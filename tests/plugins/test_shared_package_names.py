"""Issue 30, the third attack of the session: a package name two distributions share, and
kernel memory a call leaves in a pooled process.

A top-level package another installed distribution also provides is refused for the plugin
(``plugin_distribution_unsafe``): a second plugin could write into a trusted plugin's package
with its RECORD unchanged, and a plugin named like a module the site imports (``redis``,
``celery``) would replace it.  A pooled process holding more descriptors than when it got
ready (socket pairs whose buffers are kernel memory) is not kept.  Real distributions in a
``sys.path`` directory, as pip leaves them; nothing here weakens or bypasses the sandbox.
"""

from __future__ import annotations

import pytest

from tests.plugins.packages import MANIFEST, trusted_t, wheel

pytestmark = pytest.mark.django_db


def test_a_second_distribution_writing_into_a_trusted_plugins_package_refuses_both(
    tmp_path, registry_on
):
    """Trust is bound to (name, version, digest of RECORD).  RECORD names the files and
    their hashes, but nothing compares the files on disk with it.  A second plugin
    distribution, ``webfetch-evil``, whose entry point is ``webfetch_t.evil:manifest``,
    has its entry point's own top-level package ``webfetch_t``: every file it installs
    there passes ``_distribution_problem`` (``head in tops``).  pip writes them over the
    trusted ``webfetch-t``'s files (``webfetch_t/__init__.py``); ``webfetch-t``'s RECORD
    is unchanged, so its trust holds and the new code runs in the site's process (no
    sandbox: the trusted path).  The registry refuses a top-level package that two
    distributions install into (the registry's own map of who installs each top-level name,
    from RECORD and ``top_level.txt``): both."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.provenance import installed_provider

    site = tmp_path / "site"
    instance = trusted_t(site, registry_on)
    before = installed_provider("t")

    rewritten = "import os as _os\nOWNED = True\n" + MANIFEST % "t"
    wheel(site, "webfetch-evil", {"evil": "webfetch_t.evil:manifest"},
           {"webfetch_t/__init__.py": rewritten,
            "webfetch_t/evil.py": MANIFEST % "evil"})  # fmt: skip
    assert (site / "webfetch_t" / "__init__.py").read_text() == rewritten  # the code changed
    registry.reset()
    problems = registry.problems()
    instance.refresh_from_db()
    report = {
        "provider_unchanged": installed_provider("t") == before,
        "trust_holds": instance.trust_holds(),
        "evil_loaded": registry.get_manifest("evil") is not None,
        "t_loaded": registry.get_manifest("t") is not None,
        "problems": problems,
    }
    # What must hold: the code the instance was trusted for changed under an unchanged
    # RECORD, so neither distribution is loaded (nothing of ``webfetch_t`` runs, in the site
    # or a sandbox), and the refusal names the shared package.
    assert not report["t_loaded"] and not report["evil_loaded"], report
    shared = [p for p in problems if "'webfetch_t' is also installed by" in p]
    assert len(shared) == 2, report


def test_a_plugin_named_like_a_module_another_distribution_provides_is_refused(
    tmp_path, registry_on
):
    """``RESERVED_NAMES`` is the standard library plus the modules the *plugin process*
    imports; a plugin's top-level package may be any other name of the environment:
    ``redis`` (django_webfetch's own broker and budget import it), ``celery``, ``openai``,
    ``cms``, ``nh3``...  Installed by pip it lands in site-packages over (or, where the
    site does not have it yet, instead of) that module, and every process of the site
    imports it unsandboxed; the registry loads it as an ordinary plugin and no check
    says anything.  Expected: a plugin whose top-level name another installed
    distribution also provides, or that the site has already imported, is refused
    (a stable reason such as ``entry_point_reserved``) and named in a check."""
    import importlib.metadata

    from django_webfetch.plugins import registry

    names = sorted(
        top for top in ("redis", "celery", "openai", "cms", "nh3")
        if top in importlib.metadata.packages_distributions()
    )  # fmt: skip
    assert names, "none of the site's third-party modules is installed here"
    site = tmp_path / "site"
    for top in names:
        files = {f"{top}/__init__.py": "", f"{top}/webfetch.py": MANIFEST % f"shadow{top}"}
        wheel(site, f"webfetch-shadow-{top}", {f"shadow{top}": f"{top}.webfetch:manifest"}, files)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    loaded = [top for top in names if registry.get_manifest(f"shadow{top}") is not None]
    # Refused for its name, not because its code could not be read (``manifest_load``).
    refused = [
        top
        for top in names
        if any(f"'shadow{top}'" in p and "manifest_load" not in p for p in registry.problems())
    ]
    assert loaded == [] and refused == names, {
        "loaded": loaded, "refused": refused, "problems": registry.problems()
    }  # fmt: skip


def test_a_registry_load_reads_the_package_map_once_however_many_plugins(
    tmp_path, registry_on, monkeypatch
):
    """The shared-package check reads every installed distribution's file list (~0.4 s
    here): once per load, not once per entry point (the 334 entry points of the
    reserved-name test took 179 s).  Counted by a wrapper of the registry's reader that
    delegates to the real one: the verdicts are still the real ones."""
    from django_webfetch.plugins import registry

    real, reads = registry._read_names, []

    def counted(dist, bases=None):
        if str(dist.metadata["Name"]) == "webfetch-many0":
            reads.append(1)
        return real(dist, bases)

    monkeypatch.setattr(registry, "_read_names", counted)
    site = tmp_path / "site"
    for i in range(12):
        files = {f"webfetch_many{i}/__init__.py": MANIFEST % f"many{i}"}
        wheel(site, f"webfetch-many{i}", {f"many{i}": f"webfetch_many{i}:manifest"}, files)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    loaded = [m.name for m in registry.manifests() if m.name.startswith("many")]
    assert sorted(loaded) == sorted(f"many{i}" for i in range(12)), registry.problems()
    assert len(reads) == 1


#: A call that fills every socket and pipe buffer it can open (kernel memory: in no
#: ``VmRSS``, no ``/tmp``) and keeps them open; its result is the bytes the kernel took.
_BUFFERS = r"""
import os, socket, sys
kept, held = sys.modules.setdefault('__kept_fds__', []), 0
block = bytearray(12 << 20)  # resident, counted: under the 16 MiB margin alone
for i in range(0, len(block), 4096):
    block[i] = 1
kept.append(block)
held += len(block)
def fill(fd):
    global held
    os.set_blocking(fd, False)
    chunk = b'x' * 65536
    while True:
        try:
            n = os.write(fd, chunk)
        except (BlockingIOError, OSError):
            return
        held += n
while True:
    try:
        a, b = socket.socketpair()
    except OSError:
        break
    kept.append((a, b))
    fill(a.fileno())
    fill(b.fileno())
result = held
"""


def test_a_process_a_call_left_holding_socket_buffers_is_not_pooled(probe, settings):
    """``_footprint`` counts ``VmRSS``, ``VmSwap`` and ``/tmp``.  Bytes queued in socket
    buffers of socketpairs the call keeps open are kernel memory counted in none of them:
    a call leaves 12 MiB resident (counted, under the margin) and about 6 MiB queued in
    the socketpairs RLIMIT_NOFILE 32 lets it open (measured: 6,528,256 bytes), and its
    process is pooled holding more than the margin.  Low: bounded by RLIMIT_NOFILE and
    the default socket buffer sizes (setsockopt refused), about 6 MiB per process.
    What must hold: a pooled process holds at most ``MAX_IDLE_GROWTH`` more than when it
    got ready, whatever the memory's kind."""
    from django_webfetch.plugins.runtime.host import MAX_IDLE_GROWTH, idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        assert probe("result = 0").text == '{"result": "0"}'
        outcome = probe(_BUFFERS)
        assert outcome.text.startswith('{"result": '), outcome
        held = int(outcome.text.split('"')[3])
        pooled = idle_processes()
        assert not (pooled == 1 and held > MAX_IDLE_GROWTH), (held >> 20, pooled)
    finally:
        shutdown()


def _reads_of(registry, monkeypatch, name):
    """Counts the registry's reads of distribution ``name``'s file list (a wrapper that
    delegates to the real reader: the verdicts stay the real ones)."""
    real, reads = registry._read_names, []

    def counted(dist, bases=None):
        if str(dist.metadata["Name"]) == name:
            reads.append(1)
        return real(dist, bases)

    monkeypatch.setattr(registry, "_read_names", counted)
    return reads


def test_a_load_reads_again_exactly_the_distributions_that_changed(tmp_path, registry_on):
    """The package map is kept between loads for a distribution whose metadata files are
    unchanged (the environment's ~300 file lists took ~1 s per load); one whose
    ``top_level.txt`` was rewritten, or a new distribution beside it, is read again and
    the shared-package verdict follows what is on disk now.  The settle window (a file
    changed in the last seconds is read again at every load) is closed here so that the
    memo is used at once; the next test keeps it open."""
    from django_webfetch.plugins import registry

    registry_on.setattr(registry, "_SETTLE_NS", 0)
    reads = _reads_of(registry, registry_on, "webfetch-t")
    site = tmp_path / "site"
    info = wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
                 {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    registry.reset()
    assert registry.get_manifest("t") is not None
    assert len(reads) == 1  # the second load used what the first read
    # The distribution now says it installs ``redis`` (which the site's Redis client
    # installs too): read again, and refused.
    (info / "top_level.txt").write_text("webfetch_t\nredis\n")
    registry.reset()
    assert registry.get_manifest("t") is None
    assert len(reads) == 2
    assert any("'redis'" in p and "plugin_distribution_unsafe" in p for p in registry.problems())
    (info / "top_level.txt").unlink()
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    # A second distribution writing into ``webfetch_t``: both refused on the next load.
    wheel(site, "webfetch-u", {}, {"webfetch_t/extra.py": "X = 1\n"})
    registry.reset()
    assert registry.get_manifest("t") is None
    assert any("webfetch-u" in p for p in registry.problems()), registry.problems()


def test_a_distribution_rewritten_within_the_clocks_tick_is_read_again(tmp_path, registry_on):
    """File times are stamped from a coarse clock: a ``top_level.txt`` rewritten with the
    same size right after a load may keep its key.  Until its files have settled a
    distribution is read at every load (as git treats a racily clean index entry), so the
    verdict follows the rewrite whatever the clock."""
    from django_webfetch.plugins import registry

    reads = _reads_of(registry, registry_on, "webfetch-t")
    site = tmp_path / "site"
    info = wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
                 {"webfetch_t/__init__.py": MANIFEST % "t"},
                 {"top_level.txt": b"webfetch_t\nwebfetch_x\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    (info / "top_level.txt").write_bytes(b"webfetch_t\nredis\n\n\n\n\n\n")  # same size
    registry.reset()
    assert registry.get_manifest("t") is None
    assert len(reads) == 2
