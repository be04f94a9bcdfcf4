"""The plugin process imports the standard library and nine modules of django_webfetch
before the plugin, nothing else: no third-party package (httpx, dnspython, jsonschema,
Django) runs in it unless the plugin imports it, and its start costs a bare interpreter's
order of magnitude (``python -m tests.benchmarks.bench_plugin_runtime``: the cold call)."""

from __future__ import annotations

import sys

from tests.plugins.packages import guest_bootstrap_report


def test_the_plugin_process_imports_no_third_party_module_before_the_plugin():
    modules = guest_bootstrap_report(
        "import django_webfetch.plugins.runtime.guest, django_webfetch.plugins.sandbox",
        "sorted(sys.modules)",
    )
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
