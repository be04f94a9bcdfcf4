"""Issue 30, attack 16, findings 1-3: what holds after the fixes, for any input.

1. Any file name (any bytes but ``/`` and NUL) anywhere in a plugin directory's package is
   one installed state: two looks at the same files compare equal, and provider look-ups
   load the registry once (a key with a time in it made every look-up load it again).
2. A file stays racily clean while its change time is recent, whatever its modification
   time says, and a modification time in the future no longer keeps it from settling.
3. Any text in a tool's arguments, lone surrogates included, gives a ``ToolResult`` (a
   lone surrogate: ``invalid_arguments``), never an exception; the channel never raises a
   foreign error, and a plugin's own text that UTF-8 cannot carry reaches the host made
   valid instead of ending its process.

The distributions are written as an installer or an operator leaves them; the registry,
the runtime and the tools are the real ones, nothing patched.
"""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, dist_info, wheel

_FUNCTION_FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]

#: A file name: any bytes but ``/`` and NUL, not ``.`` or ``..``.
_NAMES = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)
#: Where the name goes: in the package, in its bytecode cache, beside it.
_PLACES = st.sampled_from(["package", "cache", "directory"])

_examples = itertools.count()


@pytest.mark.django_db
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=_FUNCTION_FIXTURES)
@given(name=_NAMES, place=_PLACES)
def test_any_file_name_in_a_plugin_directory_is_one_installed_state(
    tmp_path, plugin_dirs, name, place
):
    from django_webfetch.plugins import registry

    site = tmp_path / f"example{next(_examples)}"
    site.mkdir()
    dist_info(site, "webfetch-n16", {"n16": "webfetch_n16:manifest"})  # no RECORD
    package = site / "webfetch_n16"
    package.mkdir()
    (package / "__init__.py").write_text(MANIFEST % "n16")
    where = {
        "package": os.fsencode(package),
        "cache": os.fsencode(site / "__pycache__"),
        "directory": os.fsencode(site),
    }[place]
    os.makedirs(where, exist_ok=True)
    suffix = b".cpython-311.pyc" if place == "cache" else b""
    target = os.path.join(where, name + suffix)
    if not os.path.isdir(target):  # a name the test wrote already: added to, not replaced
        with open(target, "ab"):
            pass
    plugin_dirs(site)
    assert registry._installed()[2] == registry._installed()[2], "the same files, two states"
    registry.provider("n16")
    first = registry.generation()
    registry.provider("n16")
    registry.provider("n16")
    assert registry.generation() == first, "a provider look-up loaded the registry again"


def test_a_distributions_key_is_its_real_path_through_any_link(tmp_path):
    """A look over every distribution (``registry._all_distributions``) takes the real path
    of each directory holding metadata directories once (``registry._real``): each
    distribution's key is still ``os.path.realpath`` of its metadata directory, through a
    linked search directory, a linked metadata directory, a link to a link and a link that
    points nowhere; and a link pointed elsewhere between two looks is seen at the next
    (nothing is kept past a look)."""
    from importlib.metadata import distributions

    from django_webfetch.plugins import registry

    real, other = tmp_path / "real", tmp_path / "other"
    for site in (real, other):
        dist_info(site, "webfetch-a", {})
    (tmp_path / "elsewhere").mkdir()
    dist_info(tmp_path / "elsewhere", "webfetch-b", {})
    os.symlink(
        tmp_path / "elsewhere" / "webfetch_b-1.0.dist-info", real / "webfetch_b-1.0.dist-info"
    )
    os.symlink(real / "webfetch_b-1.0.dist-info", real / "webfetch_c-1.0.dist-info")
    os.symlink(tmp_path / "nowhere", real / "webfetch_d-1.0.dist-info")
    linked = tmp_path / "linked"
    os.symlink(real, linked)

    def keys() -> dict[str, str]:
        parents: dict[str, str] = {}
        found = {}
        for dist in distributions(path=[str(linked)]):
            key = registry._dist_key(dist, parents)
            assert key == os.path.realpath(dist._path), (dist._path, key)
            found[os.path.basename(dist._path)] = key
        for name in ("webfetch_c-1.0.dist-info", "webfetch_d-1.0.dist-info", "x/..", "."):
            path = str(linked / name)
            assert registry._real(path, parents) == os.path.realpath(path), path
        return found

    first = keys()
    assert first["webfetch_a-1.0.dist-info"] == str(real / "webfetch_a-1.0.dist-info")
    assert first["webfetch_b-1.0.dist-info"].startswith(str(tmp_path / "elsewhere"))
    os.unlink(linked)
    os.symlink(other, linked)
    assert keys()["webfetch_a-1.0.dist-info"] == str(other / "webfetch_a-1.0.dist-info")


@given(
    mtime=st.integers(min_value=0, max_value=2**63 - 1),
    ctime=st.integers(min_value=0, max_value=2**63 - 1),
    now=st.integers(min_value=0, max_value=2**63 - 1),
)
@hypothesis_settings(max_examples=500, deadline=None)
def test_a_file_settles_by_its_change_time_whatever_its_modification_time(mtime, ctime, now):
    """The guarantee ``settled`` exists for: a file changed within ``SETTLE_NS`` of now
    (its change time, which the kernel stamps at every write) is never kept, whatever its
    modification time says; a file whose change time has settled is kept when its
    modification time has settled too or lies in the future (no write's: ``utime``)."""
    from django_webfetch.plugins import provenance

    window = provenance.SETTLE_NS
    verdict = provenance.settled([(1, 2, 3, mtime, ctime)], now=now)
    if ctime > now - window:
        assert not verdict  # changed within the window: read again
    elif mtime > now or mtime <= now - window:
        assert verdict
    else:  # modified within the window (and not in the future): racily clean, as before
        assert not verdict
    assert provenance.settled([(-2,)], now=now)  # an error key


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(st.characters(codec=None) | st.characters(categories=["Cs"])),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(st.characters(categories=["Cs", "Ll"])), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_the_channel_encodes_a_message_or_says_it_cannot(value):
    """``protocol.encode`` (what ``Channel.send`` writes): bytes a peer's reader takes, or
    ``UnencodableMessage`` (a ``ProtocolError``), never a foreign error."""
    from django_webfetch.plugins.runtime import protocol

    try:
        body = protocol.encode({"op": "x", "value": value})
    except protocol.UnencodableMessage:
        return
    assert protocol.parse(body)["op"] == "x"


_ECHO = """\
import json


def run(plugin, arguments):
    mode = arguments.get('mode')
    if mode == 'text':
        return 'a\\ud800b'
    if mode == 'json':
        return {'k': '\\udcff'}
    if mode == 'error':
        raise type('Bad\\ud800', (Exception,), {})()
    if mode == 'http':
        try:
            plugin.http.get('http://example.org/\\ud800')
        except TypeError:
            return 'refused: TypeError'
    return 'got ' + json.dumps(arguments, ensure_ascii=True)


def manifest():
    return {'name': 'e16', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'e16_run', 'description': 'x', 'handler': run,
                       'parameters': {'type': 'object',
                                      'properties': {'q': {'type': 'string'},
                                                     'mode': {'type': 'string'}}}}]}
"""

_TEXT = st.text(
    st.characters(codec=None) | st.characters(categories=["Cs"]) | st.sampled_from('\0"\\'),
    max_size=8,
)


@pytest.fixture
def isolated_tool(tmp_path, plugin_dirs):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "e"
    wheel(site, "webfetch-e16", {"e16": "webfetch_e16:manifest"},
          {"webfetch_e16/__init__.py": _ECHO})  # fmt: skip
    plugin_dirs(site)
    assert registry.origin("e16") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="e16", alias="e16")
    tool = next(t for t in plugin_tools() if t.name == "e16_run")
    return tool, ToolContext(approved=True, call_id="e16", plugin_instance=instance)


@pytest.mark.django_db
@hypothesis_settings(max_examples=12, deadline=None, suppress_health_check=_FUNCTION_FIXTURES)
@given(text=_TEXT, as_key=st.booleans())
def test_any_text_in_an_isolated_plugins_arguments_gives_a_result(isolated_tool, text, as_key):
    """Text with a lone surrogate (a value or a key) fails ``invalid_arguments`` before
    anything is sent; any other text reaches the plugin as it is."""
    from django_webfetch.tools.registry import validate_arguments

    tool, context = isolated_tool
    arguments = {"q": "x", text: "y"} if as_key else {"q": text}
    result = tool.execute(arguments, context)
    valid = not any("\ud800" <= c <= "\udfff" for c in text)
    if valid:
        assert result.ok, result
        assert "got " in str(result.content)
    else:
        assert result.error == "invalid_arguments", result
        assert validate_arguments(tool, arguments).error == "invalid_arguments"


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["text", "json", "error", "http"])
def test_a_plugins_own_lone_surrogate_reaches_the_host_made_valid(isolated_tool, mode):
    """The other direction: a plugin's result, error name or request holding a lone
    surrogate gives a result (the text made valid, U+FFFD), and its process serves on."""
    tool, context = isolated_tool
    result = tool.execute({"mode": mode}, context)
    if mode == "error":
        assert result.error == "plugin_error", result
    else:
        assert result.ok, result
        str(result.content).encode("utf-8")  # valid text
        if mode == "http":
            assert "refused: TypeError" in str(result.content)
        else:  # as the character, or as JSON's escape of it
            assert "\ufffd" in str(result.content) or "\\ufffd" in str(result.content)
    assert tool.execute({"q": "after"}, context).ok  # the process served on


@pytest.mark.django_db
def test_the_host_refuses_a_call_it_cannot_send_before_taking_a_process(isolated_tool):
    """``host.execute`` called directly (no tool in front of it): arguments it cannot send
    are ``invalid_arguments``, any other text ``plugin_call_unencodable``; both are the
    runtime's own ``RuntimeFailure``."""
    from django_webfetch.plugins.registry import generation, origin
    from django_webfetch.plugins.runtime.host import RuntimeFailure, execute

    tool, context = isolated_tool
    where = origin("e16")
    call = {"tool": "e16_run", "arguments": {"q": "\ud800"}, "config": {}, "plugin": "e16",
            "alias": "e16", "reference": "r"}  # fmt: skip
    key = (context.plugin_instance.pk, generation(), where)
    with pytest.raises(RuntimeFailure) as failed:
        execute(where, key, call, None)
    assert failed.value.code == "invalid_arguments"
    with pytest.raises(RuntimeFailure) as failed:
        execute(where, key, {**call, "arguments": {}, "config": {"k": "\udcff"}}, None)
    assert failed.value.code == "plugin_call_unencodable"
