"""The plugin process imports the standard library and four modules of django_webfetch
before the plugin, nothing else: no third-party package (httpx, dnspython, jsonschema,
Django) runs in it unless the plugin imports it, and its start costs a bare interpreter's
order of magnitude (``python -m tests.benchmarks.bench_plugin_runtime``: the cold call)."""

from __future__ import annotations

import json
import subprocess
import sys

from django_webfetch.plugins.runtime import bubblewrap


def _imported_by_the_guests_bootstrap() -> list[str]:
    bootstrap = bubblewrap._BOOTSTRAP.replace(
        "from django_webfetch.plugins.runtime.guest import main; main()",
        "import django_webfetch.plugins.runtime.guest, django_webfetch.plugins.sandbox; "
        "import json; print(json.dumps(sorted(sys.modules)))",
    )
    assert bootstrap != bubblewrap._BOOTSTRAP
    done = subprocess.run(
        [bubblewrap.interpreter_path(), "-I", "-S", "-B", "-c", bootstrap,
         bubblewrap._package_root(), *bubblewrap.site_dirs(), "/nonexistent", "0"],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip
    return json.loads(done.stdout)


def test_the_plugin_process_imports_no_third_party_module_before_the_plugin():
    modules = _imported_by_the_guests_bootstrap()
    tops = {name.split(".")[0] for name in modules}
    assert tops - set(sys.stdlib_module_names) == {"__main__", "django_webfetch"}, tops
    ours = sorted(name for name in modules if name.startswith("django_webfetch"))
    # The lazily re-exporting packages import none of their other modules.
    assert ours == [
        "django_webfetch",
        "django_webfetch.exports",
        "django_webfetch.net",
        "django_webfetch.net.errors",
        "django_webfetch.plugins",
        "django_webfetch.plugins.runtime",
        "django_webfetch.plugins.runtime.guest",
        "django_webfetch.plugins.runtime.protocol",
        "django_webfetch.plugins.sandbox",
    ], ours
