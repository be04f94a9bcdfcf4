"""Issue 30, round 27 (outside attack): what gets through the plugin sandbox.

Each test fails on the code it was written against (that is the proof of its finding);
its docstring gives the severity, the route and what an attacker gains.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.packages import open_up, read_all
from tests.plugins.test_sandbox_kernel_memory_cpu_inodes_and_bytecode import _warm_pid
from tests.settle import SAFETY_NET

pytestmark = pytest.mark.django_db

_SECRET = "attack27-the-sites-secret"


#: A call whose request's name the lab's DNS never answers (the plugin's own slow
#: authoritative server, or a dropped packet: the resolver waits and asks again).
_DNS_CALL = """\
try:
    plugin.http.get('http://granted.lab.example/page', timeout=15)
except Exception:
    pass
result = 'answered'
"""


def test_a_call_that_ended_goes_on_asking_dns_questions_for_its_request(
    probe: Any, lab_settings: Any, settings: Any
) -> None:
    """Low.  Route: decision 0066 ends a call's requests by shutting their connections and
    refusing any hop before its DNS question, and accepts that a question already asked
    is not interrupted; but the lookup under way when the call ends is not ended
    (``net.resolve.DnsResolver._ask`` has no cancellation): with the usual two
    nameservers it asks A and AAAA again, server after server every 2 s, for the
    request's whole budget (up to ``WEBFETCH_TIMEOUT``, 15 s here), after the plugin
    process is dead; and the host's thread stays in the lookup that long, so the call's
    end (its failure, its process's uid and pool slot) comes at the lookup's budget, not
    "at once" as the decision says.  Gain: egress (DNS questions naming what the plugin
    chose) after its call ended and its process was killed; a call held 15 s past its
    end.  Suggested fix: ``_ask`` checks the call's ``Cancellation`` between exchanges
    and its ``select`` waits also on a wake-up descriptor the cancel writes to (or the
    exchange's socket is held and shut as connections are)."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, shutdown

    settings.WEBFETCH_DNS_NAMESERVERS = (lab_settings.DNS_V4, lab_settings.DNS_V6)
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    settings.WEBFETCH_TIMEOUT = 15
    failures: list[BaseException] = []
    killed: list[int] = []

    def asked() -> list[Any]:
        return [q for q in lab_settings.dns.queries if q.name.startswith("granted.lab.example")]

    def end_the_call(pid: int) -> None:
        try:
            assert lab_settings.wait_for(asked, SAFETY_NET), "no DNS question was asked"
            killed.append(len(asked()))
            os.kill(pid, signal.SIGKILL)
        except BaseException as exc:
            failures.append(exc)

    try:
        pid = _warm_pid(probe)
        lab_settings.dns.drop("granted.lab.example")
        ender = threading.Thread(target=end_the_call, args=(pid,), daemon=True)
        ender.start()
        with pytest.raises(RuntimeFailure) as ended:
            probe(_DNS_CALL)
        ender.join(SAFETY_NET)
    finally:
        shutdown()
    assert not failures, failures
    assert ended.value.code == "plugin_crashed", ended.value
    # The first exchange (A and AAAA to the first server) was asked while the call ran;
    # every question after it was asked for a call whose process was already dead.
    after = [(q.qtype, q.server) for q in asked()[2:]]
    assert killed and killed[0] <= 2, killed
    assert after == [], f"DNS questions asked after the call ended: {after}"


def test_the_redis_cache_keys_and_the_log_tools_files_the_settings_name_are_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Medium-low.  Route: round 26 (finding 5) masked the credential files of
    ``DATABASES[...]["OPTIONS"]`` and ``EMAIL_SSL_*`` only (``bubblewrap.CREDENTIAL_OPTIONS``,
    ``_site_data``); ``_site_data`` reads a cache's ``LOCATION`` but never its ``OPTIONS``,
    and never this project's own ``WEBFETCH_LOG_FILES``.  Decision 0060 leaves out only
    "paths other applications' settings name" (Celery's, django-storages'); these are
    Django's own cache backend's and this app's own setting.  Beside a project whose
    ``BASE_DIR`` is not masked whole (the premise of the round-26 finding) they stay
    readable: the TLS client key and certificate of Django's ``RedisCache``
    (``CACHES[...]["OPTIONS"]["ssl_keyfile"]``/``ssl_certfile``, which redis-py opens: the
    session and cache store), and the log files the site points its log tools at
    (``WEBFETCH_LOG_FILES``: request URLs with their tokens, user data), written by
    another process (gunicorn's access log, a worker's), so neither ``LOGGING`` nor
    ``written_files`` names them; neither setting decides the pooled masks
    (``SITE_SETTINGS`` has no ``WEBFETCH_LOG_FILES``).  Gain: the Redis client key (the
    sessions in the cache) and the site's logs.  Suggested fix: read every path-valued
    entry of each ``CACHES`` entry's ``OPTIONS`` (walked, any depth) as credentials, add
    ``WEBFETCH_LOG_FILES`` to ``_site_data`` (with its rotated copies) and to
    ``SITE_SETTINGS``."""
    base = system_library_dir / "mysite"
    base.mkdir()
    secrets = {
        "redis-client.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-redis-key\n",
        "redis-client.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-redis-cert\n",
        "webfetch.log": f"GET /reset?token={_SECRET}-log\n",
    }
    for name, text in secrets.items():
        (base / name).write_text(text)
    (base / "attack27_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.chdir(base)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.MEDIA_ROOT = str(base / "media")  # not the working directory
    caches = dict(settings.CACHES)
    caches["sessions"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "rediss://cache.internal:6380/0",
        "OPTIONS": {
            "ssl_keyfile": str(base / "redis-client.key"),
            "ssl_certfile": "redis-client.crt",
        },
    }
    settings.CACHES = caches
    settings.WEBFETCH_LOG_FILES = [str(base / "webfetch.log")]
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack27_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"files the settings name are readable: {seen['leaked']}"
