"""Plugin distributions the tests write, as pip leaves them: a ``.dist-info`` beside the
package, with the plugin entry points; and a call of a tool that makes no request."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any


def dist_info(
    site: Path, distribution: str, entry_points: dict[str, str], version: str = "1.0"
) -> Path:
    """``<distribution>-<version>.dist-info`` in ``site`` with its METADATA and the
    ``django_webfetch.plugins`` entry points (``{name: "module:attribute"}``)."""
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[django_webfetch.plugins]\n{lines}")
    return info


def open_up(top: Path, keep_exec: bool = False) -> None:
    """``top`` and everything beneath it readable by every uid (the sandbox runs the plugin
    under one that owns nothing): directories ``0o755``, files ``0o644`` (``0o755`` for an
    executable one with ``keep_exec``: a copied interpreter); never through a link (a
    venv's ``python``: the interpreter's)."""
    for path in [top, *sorted(top.rglob("*"))]:
        if path.is_symlink():
            continue
        executable = path.is_dir() or (keep_exec and os.access(path, os.X_OK))
        os.chmod(path, 0o755 if executable else 0o644)


def call_without_http(origin: Any, key: Any, name: str) -> Any:
    """Tool ``<name>_run`` of the plugin at ``origin``, run by the plugin runtime; a request
    through its ``http`` fails."""
    from django_webfetch.plugins.runtime.host import execute

    class NoHttp:
        def request(self, *args: Any, **kwargs: Any) -> Any:
            raise ValueError("no requests in this test")

    call = {"tool": f"{name}_run", "arguments": {}, "config": {}, "plugin": name,
            "alias": "x", "reference": "r"}  # fmt: skip
    return execute(origin, key, call, NoHttp())


def child_report(script: str, *args: str, timeout: float = 300) -> Any:
    """Run ``script`` (``python -c``) with ``args`` in a new interpreter and session, from the
    checkout with only it on ``PYTHONPATH``; the JSON object its last line prints."""
    import json
    import os
    import subprocess
    import sys

    import django_webfetch

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: A plugin module's source: ``MANIFEST % name`` (a manifest with no egress and no tools).
MANIFEST = (
    "def manifest():\n    return {'name': %r, 'version': '1.0', "
    "'description': 'x', 'egress': [], 'tools': []}\n"
)


def lazy_plugin(name: str, imports: str, answer: str, plain: str = "plain") -> str:
    """A plugin ``name`` with two tools: ``{name}_{plain}`` answers 'plain', ``{name}_lazy``
    runs ``imports`` at its first call (as many tools import at first use) and returns
    ``answer``."""
    return (
        f"def {plain}(plugin, arguments):\n    return 'plain'\n\n\n"
        f"def lazy(plugin, arguments):\n    {imports}\n    return {answer}\n\n\n"
        f"def manifest():\n    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', "
        f"'egress': [],\n            'tools': [{{'name': '{name}_{plain}', 'description': 'x', "
        f"'handler': {plain}}},\n                      {{'name': '{name}_lazy', "
        f"'description': 'x', 'handler': lazy}}]}}\n"
    )


def record_hash(data: bytes) -> str:
    """A RECORD line's digest of ``data``, as pip writes it."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(
    site: Path,
    dist: str,
    entry_points: dict[str, str],
    files: dict[str, str],
    meta_extra: dict[str, bytes] | None = None,
) -> Path:
    """Distribution ``dist`` 1.0 installed into ``site`` as pip installs a wheel: its files
    written (over whatever is there), a RECORD with each file's sha256 (pip writes RECORD
    itself, truthfully); ``meta_extra`` are further files of the wheel's ``.dist-info``
    (``top_level.txt``), which pip copies as they are."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    meta: dict[str, bytes] = {
        "METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
        **({"entry_points.txt": ("[django_webfetch.plugins]\n" + "".join(
            f"{k} = {v}\n" for k, v in entry_points.items())).encode()} if entry_points else {}),
        **(meta_extra or {}),
    }  # fmt: skip
    every = {k: v.encode() for k, v in files.items()}
    every.update({f"{info.name}/{k}": v for k, v in meta.items()})
    write_installed(site, info, every)
    return info


def write_installed(site: Path, info: Path, every: dict[str, bytes]) -> None:
    """``every`` file (path under ``site``: bytes) written, and ``info``'s RECORD listing
    each with its sha256 and size, as pip writes it."""
    lines = []
    for name, data in every.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        lines.append(f"{name},{record_hash(data)},{len(data)}\n")
    lines.append(f"{info.name}/RECORD,,\n")
    (info / "RECORD").write_text("".join(lines))


def call_tool(origin: Any, key: Any, plugin: str, tool: str, limits: Any) -> str:
    """The text of tool ``tool`` of plugin ``plugin`` (at ``origin``), called through the
    plugin runtime's pool under ``key`` with ``limits`` and no ``http``."""
    from django_webfetch.plugins.runtime.host import execute

    message = {"tool": tool, "arguments": {}, "config": {}, "plugin": plugin,
               "alias": plugin, "reference": plugin}  # fmt: skip
    return str(execute(origin, key, message, None, limits=limits).text)


def trusted_t(site: Path, registry_on: Any, source: str | None = None) -> Any:
    """Plugin ``t`` (distribution ``webfetch-t``, package ``webfetch_t`` holding
    ``source``, by default a plain manifest) installed into ``site``, put on ``sys.path``
    and loaded, with an instance the operator trusted: the ``PluginInstance``, whose trust
    holds."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t" if source is None else source})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    return instance


def assert_one_owner(served: list[tuple[str, str, str]]) -> None:
    """No tool name and no group of ``served`` ((plugin, tool, group) rows) is served for
    two plugins."""
    by_name: dict[str, set[str]] = {}
    by_group: dict[str, set[str]] = {}
    for plugin, tool, group in served:
        by_name.setdefault(tool, set()).add(plugin)
        by_group.setdefault(group, set()).add(plugin)
    assert all(len(owners) == 1 for owners in [*by_name.values(), *by_group.values()]), served


def requires_metadata(name: str, requires: list[str], version: str = "1.0") -> dict[str, bytes]:
    """The ``METADATA`` of distribution ``name`` requiring each of ``requires``."""
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{lines}"
    return {"METADATA": text.encode()}


def plugin_requiring(site: Path, requires: list[str]) -> Any:
    """Plugin ``t`` (distribution ``webfetch-t``) requiring ``requires``, in ``site``: its
    distribution as ``importlib.metadata`` finds it there."""
    from importlib.metadata import distributions

    meta = requires_metadata("webfetch-t", requires)
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, meta)  # fmt: skip
    return next(iter(distributions(name="webfetch-t", path=[str(site)])))


def guest_bootstrap_report(imports: str, report: str) -> Any:
    """What the plugin process's bootstrap (``bubblewrap._BOOTSTRAP``: ``-I -S -B``, the
    standard library only, django_webfetch by location; the site directories in
    ``sys.argv[2:-2]``) reports when it runs ``imports`` then prints ``report`` (a JSON
    expression) instead of the guest."""
    import json
    import subprocess

    from django_webfetch.plugins.runtime import bubblewrap

    bootstrap = bubblewrap._BOOTSTRAP.replace(
        "from django_webfetch.plugins.runtime.guest import main; main()",
        f"{imports}; import json; print(json.dumps({report}))",
    )
    assert bootstrap != bubblewrap._BOOTSTRAP
    done = subprocess.run(
        [bubblewrap.interpreter_path(), "-I", "-S", "-B", "-c", bootstrap,
         bubblewrap._package_root(), *bubblewrap.site_dirs(), "/nonexistent", "0"],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip
    return json.loads(done.stdout)


# -- an extension module linking a vendored shared library (the manylinux layout) ---------

#: The vendored library: ``wfx_answer`` returns ``answer``.
LIBRARY_C = 'const char *wfx_answer(void) { return "%(answer)s"; }\n'
#: An ELF constructor appending ``who`` to file ``marker`` when the object is mapped.
MARK_C = """\
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void wf_marked(void) {
    int fd = open("%(marker)s", O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) { write(fd, "%(who)s\\n", %(size)d); close(fd); }
}
"""
#: The extension module ``_speed``: ``answer()`` returns the library's ``wfx_answer()``.
EXTENSION_C = """\
#include <Python.h>
extern const char *wfx_answer(void);
static PyObject *answer(PyObject *s, PyObject *a) { return PyUnicode_FromString(wfx_answer()); }
static PyMethodDef M[] = {{"answer", answer, METH_NOARGS, ""}, {0}};
static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "_speed", 0, -1, M};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&D); }
"""


def cc() -> str:
    """The C compiler (the test is skipped without one)."""
    import shutil

    import pytest

    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.skip("no C compiler on this machine")
    return found


def _marked(marker: Path | None, who: str) -> str:
    if marker is None:
        return ""
    return MARK_C % {"marker": marker, "who": who, "size": len(who) + 1}


def compile_shared(build: Path, out: str, source: str, *flags: str) -> bytes:
    """``source`` compiled into shared object ``build/out`` with ``flags``: its bytes."""
    import subprocess
    import sysconfig

    build.mkdir(parents=True, exist_ok=True)
    (build / "src.c").write_text(source)
    include = sysconfig.get_paths()["include"]
    subprocess.run([cc(), "-shared", "-fPIC", f"-I{include}", "-o", str(build / out),
                    str(build / "src.c"), *flags], check=True)  # fmt: skip
    return (build / out).read_bytes()


def vendored_library(
    build: Path, libname: str, answer: str, marker: Path | None = None, soname: bool = True
) -> bytes:
    """Library ``build/libname`` answering ``answer``, its ``DT_SONAME`` its name (none
    unless ``soname``: auditwheel sets one on each library it vendors), with a constructor
    writing ``lib`` to ``marker`` (none: ``None``)."""
    flags = [f"-Wl,-soname,{libname}"] if soname else []
    return compile_shared(build, libname, LIBRARY_C % {"answer": answer} + _marked(marker, "lib"),
                          *flags)  # fmt: skip


def linking_extension(
    build: Path, libname: str, runpath: str, marker: Path | None = None, new_dtags: bool = False
) -> bytes:
    """Extension module ``_speed`` (``build/ext.so``) linking ``build/libname`` (built
    before), its search path ``runpath`` (``DT_RUNPATH`` with ``new_dtags``, else as the
    linker's default writes it), with a constructor writing ``ext`` to ``marker``."""
    flags = [f"-L{build}", f"-l:{libname}", f"-Wl,-rpath,{runpath}"]
    flags += ["-Wl,--enable-new-dtags"] if new_dtags else []
    return compile_shared(build, "ext.so", EXTENSION_C + _marked(marker, "ext"), *flags)


def linked_extension(
    build: Path,
    libname: str,
    answer: str,
    runpath: str,
    marker: Path | None = None,
    soname: bool = True,
    new_dtags: bool = False,
) -> tuple[bytes, bytes]:
    """(the extension ``_speed`` linking ``libname`` through ``runpath``, the library
    answering ``answer``): ``linking_extension`` and ``vendored_library`` in ``build``."""
    library = vendored_library(build, libname, answer, marker, soname)
    return linking_extension(build, libname, runpath, marker, new_dtags), library


def install_extension(
    site: Path, dist: str, package: str, extension: bytes, library: bytes, library_at: str
) -> Path:
    """Distribution ``dist`` 1.0 (package ``package``: an ``__init__`` answering
    'reviewed' and the extension ``_speed``; its library at ``library_at`` below ``site``)
    written into ``site`` as pip installs it; the extension's path."""
    import importlib.machinery

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode()
    files = {f"{package}/__init__.py": b"ANSWER = 'reviewed'\n",
             f"{package}/_speed{suffix}": extension,
             library_at: library,
             f"{info.name}/METADATA": meta}  # fmt: skip
    write_installed(site, info, files)
    return site / package / f"_speed{suffix}"


#: Run in the plugin sandbox by ``read_all``: reads every file under each directory given;
#: which held the secret, and which files it read (the control: they were bound).
_READ_ALL = """\
import json, os
leaked, read = [], []
for root in %r:
    for top, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, 'rb') as fh:
                    data = fh.read()
            except OSError:
                continue
            read.append(path)
            if %r in data:
                leaked.append(path)
result = json.dumps({'leaked': leaked, 'read': read})
"""


def read_all(probe: Any, roots: list[str], secret: str) -> dict[str, Any]:
    """What the probe plugin's sandbox reads of ``roots``: ``{"leaked": [paths holding
    secret], "read": [every path read]}``; the plugin processes are shut down after."""
    import json

    from django_webfetch.plugins.runtime.host import shutdown

    try:
        outcome = probe(_READ_ALL % (roots, secret.encode()))
    finally:
        shutdown()
    assert outcome.kind == "json", outcome
    seen: dict[str, Any] = json.loads(json.loads(outcome.text)["result"])
    return seen
