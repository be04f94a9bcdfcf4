"""Every value a plugin distribution controls is shown escaped, wherever it is shown
(attack 9, finding 8: ``plugins.shown.shown``).

A distribution's METADATA ``Name`` and ``Version`` are the author's text: a terminal escape
(``ESC [1A ESC [2K``) rewrites the lines printed before it, a bidirectional override
(U+202E) reorders a name on the terminal and on an HTML page.  The property: for any such
text in the plugin's own ``Version``, a dependency's ``Version``, and the
names of two distributions that claim one entry point, no surface prints a character that
is not printable, and the surfaces that show the plugin's distribution show it escaped.
Real parts only: distributions installed as pip installs a wheel, the real registry, the
real commands, the real admin, the real system checks.
"""

from __future__ import annotations

import io
import logging
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.shown import shown
from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db

#: The characters that hide or forge text: C0/C1 controls (ESC, CSI), format characters
#: (bidi overrides and isolates, zero-width joiners, tags), line and paragraph separators,
#: spaces other than U+0020, private use, and combining marks (alone after "-").
_CATEGORIES = ["Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Mn", "Ll", "Nd"]
#: Always one of these in a value: the attacks of the finding.
_ATTACKS = ["\x1b[1A\x1b[2K\r", "\u202e", "\u2066", "\x9b2K", "\u200b", "\x07", "\U000e0041"]
PAYLOAD = st.builds(
    lambda attack, rest, at: rest[:at] + attack + rest[at:],
    st.sampled_from(_ATTACKS),
    # Line breaks would end the METADATA header itself (the value would be another line).
    st.text(st.characters(categories=_CATEGORIES, exclude_characters="\n\r"), max_size=10),
    st.integers(0, 10),
)


def hidden(text: str) -> list[str]:
    """The characters of ``text`` that are not printable, line breaks between lines and
    an HTML page's own tabs aside."""
    return sorted({hex(ord(c)) for c in text if not c.isprintable() and c not in "\n\t"})


def test_shown_escapes_every_character_that_is_not_printable():
    """The function itself, over every code point: its result is printable, printable
    ASCII is kept as it is, and every character that is not printable is escaped."""
    for code in range(0x110000):
        char = chr(code)
        out = shown(f"a{char}b")
        assert out.isprintable(), hex(code)
        if 0x20 <= code < 0x7F:
            assert out == f"a{char}b"
        elif not char.isprintable():
            escape = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
            assert out == f"a{escape}b", hex(code)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(categories=[*_CATEGORIES, "Cs", "Cn", "Lo", "Po"])))
def test_shown_is_printable_for_any_text(text):
    out = shown(text)
    assert out.isprintable() or out == ""
    assert shown(out) == out  # escaping what is shown changes nothing


def _site(root, payload: str):
    """Plugin ``t`` (distribution ``webfetch-t``, ``Version: 1.0<payload>``) requiring
    ``wfdep-h`` (``Version: 1.0<payload>``), and plugin ``u``
    claimed by two distributions, one named ``wfdup-<payload>`` (refused:
    ``entry_point_duplicate``)."""
    site = root / "site"
    # ``Version`` last: a carriage return in it ends the header line.
    own = (
        f"Metadata-Version: 2.1\nName: webfetch-t\nRequires-Dist: wfdep-h\nVersion: 1.0{payload}\n"
    )
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, {"METADATA": own.encode()})  # fmt: skip
    dep = f"Metadata-Version: 2.1\nName: wfdep-h\nVersion: 1.0{payload}\n"
    wheel(site, "wfdep-h", {}, {"wfdep_h/__init__.py": "X = 1\n"}, {"METADATA": dep.encode()})
    for dist in ("wfdup-a", "wfdup-b"):
        named = f"wfdup-{payload}" if dist == "wfdup-a" else dist
        meta = f"Metadata-Version: 2.1\nName: {named}\nVersion: 1.0\n".encode()
        wheel(site, dist, {"u": "webfetch_u:manifest"},
              {"webfetch_u/__init__.py": MANIFEST % "u"}, {"METADATA": meta})  # fmt: skip
    return site


def _command(*args: str) -> str:
    """What ``manage.py webfetch plugin ARGS`` prints, its error included."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = io.StringIO()
    try:
        call_command("webfetch", "plugin", *args, stdout=out)
    except CommandError as exc:
        return f"{out.getvalue()}\nerror: {exc}"
    return out.getvalue()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(PAYLOAD)
def test_no_surface_prints_what_a_distribution_hides(
    tmp_path_factory, registry_on, admin_client, payload
):
    from django_webfetch import checks
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.provenance import installed_provider

    site = _site(tmp_path_factory.mktemp("shown"), payload)
    registry_on.syspath_prepend(str(site))
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("django_webfetch.plugins")  # the registry's logger
    log.addHandler(handler)
    registry.reset()
    try:
        found = installed_provider("t")
        assert found is not None, registry.problems()
        # The value as importlib reads it holds a character that hides text (an invalid
        # PEP 440 version: the plugin's own is shown as "?" since issue 30, attack 12).
        from importlib.metadata import distributions

        raw = next(iter(distributions(name="webfetch-t", path=[str(site)]))).version
        assume(hidden(f"{found.name} {raw}"))
        PluginInstance.objects.all().delete()
        instance = PluginInstance.objects.create(plugin="t", alias="t")
        # Trusted for another version: W034, ``list`` and the admin quote the installed one.
        PluginInstance.objects.filter(pk=instance.pk).update(
            trusted=True, trusted_distribution="webfetch-t", trusted_version="0.9"
        )
        admin = "/admin/django_webfetch/plugininstance/"
        selected = {"action": "confirm_trust", "_selected_action": [instance.pk]}
        confirm_page = admin_client.post(admin, selected).content.decode()
        wrong = {**selected, "post": "yes", f"shown_{instance.pk}": "0" * 32}
        confirm_message = admin_client.post(admin, wrong, follow=True).content.decode()
        system_checks = [
            *checks.check_plugins(),
            *checks.check_plugin_path(),
            *checks.check_plugin_instances(databases=["default"]),
        ]
        surfaces = {
            # The command line.
            "plugin list": _command("list"),
            "plugin install (a refused plugin)": _command("install", "u"),
            "plugin install": _command("install", "t", "--alias", "t2"),
            "plugin trust": _command("trust", "t"),
            "plugin trust --confirm (not the one shown)": _command(
                "trust", "t", "--confirm", "0" * 32
            ),
            "plugin upgrade": _command("upgrade", "t"),
            "plugin check": _command(
                "check", "http://a.example/", "--plugin", "t", "--no-resolve"
            ),  # fmt: skip
            # The admin.
            "admin change page": admin_client.get(f"{admin}{instance.pk}/change/").content.decode(),
            "admin list": admin_client.get(admin).content.decode(),
            "admin trust confirmation page": confirm_page,
            "admin trust confirmation message": confirm_message,
            # The system checks (W030-W034, E030, E035).
            "system checks": "\n".join(f"{m.id} {m.msg} {m.hint or ''}" for m in system_checks),
            # The server's log (the registry's refusals).
            "server log": "\n".join(logged),
        }
        for name, text in surfaces.items():
            assert not hidden(text), (name, hidden(text), text[-3000:])
        escaped = shown(found)
        html = escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        html = html.replace("'", "&#x27;").replace('"', "&quot;")
        for name in ("plugin list", "plugin trust"):
            assert escaped in surfaces[name], (name, escaped, surfaces[name])
        # A dependency whose Version is not PEP 440 cannot be pinned: the confirmation is
        # refused for that before any fingerprint is compared (attack 9, finding 8).
        confirm = surfaces["plugin trust --confirm (not the one shown)"]
        assert escaped in confirm or "(plugin_dependency_unpinnable)" in confirm, confirm
        for name in ("admin change page", "admin trust confirmation page"):
            assert html in surfaces[name], (name, html)
        assert escaped in surfaces["system checks"]
        # The refused plugin's distributions are named (escaped) where it is refused.
        for name in ("plugin list", "plugin install (a refused plugin)", "system checks"):
            assert re.search(r"wfdup-\S", surfaces[name]), (name, surfaces[name])
        # (Its Version is shown as "?" when it is not PEP 440: never the raw text.)
        assert "  dependency:    wfdep-h " in surfaces["plugin trust"]
        assert re.search(r"wfdup-\S", surfaces["server log"]), logged
    finally:
        log.removeHandler(handler)
        registry_on.undo()
        registry.reset()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(PAYLOAD)
def test_the_admin_shows_a_config_value_escaped_and_reads_it_back_unchanged(admin_client, payload):
    """A config value (a default the plugin's manifest chose) is written in the admin's
    config field with JSON escapes for what ``shown`` escapes: the page hides nothing and
    the field holds the same value."""
    import html
    import json

    from django_webfetch.plugins.models import PluginInstance

    PluginInstance.objects.filter(alias="g").delete()
    config = {"k": payload, f"n{payload}": [payload, "\U0001f600"]}
    instance = PluginInstance.objects.create(plugin="gone", alias="g", config=config)
    page = admin_client.get(
        f"/admin/django_webfetch/plugininstance/{instance.pk}/change/"
    ).content.decode()
    assert not hidden(page), hidden(page)
    field = re.search(r'<textarea name="config"[^>]*>\n?(.*?)</textarea>', page, re.S)
    assert field is not None
    assert json.loads(html.unescape(field[1])) == config
