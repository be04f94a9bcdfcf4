"""net/ and text/ are pure: importing them pulls in no Django (DESIGN.md §1)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import django_webfetch.net


@pytest.mark.parametrize("module", ["django_webfetch.net", "django_webfetch.text"])
def test_pure_layers_do_not_import_django(module):
    code = (
        f"import sys, {module}, {module}.__init__\n"
        "import django_webfetch.net.fetcher, django_webfetch.net.guard\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m == 'django' or m.startswith(('django.', 'rest_framework')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_net_does_not_import_the_text_layer():
    code = "import sys, django_webfetch.net\nprint('django_webfetch.text' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_exported_members_are_sorted_and_real():
    names = django_webfetch.net.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(django_webfetch.net, name) is not None
    public = {n for n in dir(django_webfetch.net) if not n.startswith("_")}
    modules = {
        "base",
        "body",
        "bridge",
        "errors",
        "foreign",
        "failures",
        "fetcher",
        "guard",
        "guarded",
        "policy",
        "rawurl",
        "steps",
        "transport",
        "resolve",
        "hosts",
        "ipclass",
        "urlparse",
        "urlnorm",
    }
    assert public - modules - {"annotations"} == set(names)
