"""Packages that re-export lazily (``django_webfetch.exports``) export exactly their
``__all__``, each name the object its module defines, listed by ``dir()``; an unknown
name is an ``AttributeError``; a submodule is reachable as an attribute."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

LAZY = ["django_webfetch.net", "django_webfetch.plugins"]


@pytest.mark.parametrize("name", LAZY)
def test_every_exported_name_is_its_modules_object(name):
    package = importlib.import_module(name)
    exports = package._EXPORTS
    assert sorted(exports) == sorted(package.__all__)
    for attribute, module in exports.items():
        defined = importlib.import_module(f"{name}.{module}")
        assert getattr(package, attribute) is getattr(defined, attribute), attribute
        assert attribute in dir(package)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018
    assert not hasattr(package, "no_such_name")


@pytest.mark.parametrize("name", LAZY)
def test_a_star_import_and_a_submodule_attribute_work_in_a_fresh_interpreter(name):
    code = (
        f"from {name} import *; import {name} as p; "
        "assert all(n in globals() for n in p.__all__); "
        "import sys; m = sorted(n for n in sys.modules if n.startswith(p.__name__ + '.')); "
        "first = m[0].rpartition('.')[2]; assert getattr(p, first).__name__ == m[0]; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_importing_one_module_of_net_imports_no_other_dependency():
    root = str(Path(importlib.import_module("django_webfetch").__file__).parents[1])
    code = (
        f"import sys; sys.path.insert(0, {root!r}); import django_webfetch.net.errors; "
        "print(sorted({n.split('.')[0] for n in sys.modules} - set(sys.stdlib_module_names)))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "['__main__', 'django_webfetch']", done.stderr[-2000:]
