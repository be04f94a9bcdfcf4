"""Benchmark of requests that return at once and answers that stream:
``python -m tests.benchmarks.bench_streaming`` (as root: it runs in a private network
namespace).

The scripted OpenAI-compatible provider of the tests (``tests/assistant/provider.py``,
HTTPS on a public-looking address of the namespace's loopback) thinks 0.3 s, then streams
an answer of about 1,200 characters in 12-character chunks, 20 ms apart (about 2 s).  The
site is served as the example serves it: uvicorn, ASGI, the background runner.  A client
posts the message, then reads ``runs/{id}/stream/`` (Server-Sent Events) until the run
completes.  Measured, median of ``ROUNDS`` runs per mode:

- **held**: how long ``POST messages/`` took (the request the editor's page waits for),
  also as a ratio against ``GET runs/{id}/`` (a small authenticated read) just after it;
- **first delta**: from the POST to the first ``text_delta`` event received on the stream;
- **delta latency**: from the provider writing the chunk that completed a delta to the
  client receiving that delta (median and worst over every delta of every run);
- **deltas**: events per run against the provider's chunks (the coalescing).

The baseline, in the same process, is ``WEBFETCH_RUNNER = "inline"``: the run advances in
the request, as it did before the background runner (the POST is held for the whole run).
Nothing leaves the namespace.  Not collected by pytest.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from tests.asgi import CSRF, new_conversation, post_message, uvicorn_in_a_thread
from tests.benchmarks._netns import in_namespace, setup_network, start_dns

PROVIDER_ADDRESS = "11.0.0.20"
DNS_ADDRESS = "11.0.0.53"
ROUNDS = 5
TEXT = " ".join(f"word{i:03d}" for i in range(150))  # ~1,200 characters
CHUNK = 12
CHUNK_DELAY = 0.02
THINK = 0.3


def _setup(workdir: str) -> tuple[Any, str, dict[str, str]]:
    import trustme

    from tests.assistant.provider import HOST, PORT, ProviderServer

    setup_network([PROVIDER_ADDRESS, DNS_ADDRESS])
    start_dns(HOST, PROVIDER_ADDRESS, listen=DNS_ADDRESS)
    ca = trustme.CA()
    ca_file = os.path.join(workdir, "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST).configure_cert(context)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tests.assistant.serve_settings",
        WEBFETCH_TEST_DB=os.path.join(workdir, "db.sqlite3"),
        WEBFETCH_TEST_NAMESERVERS=json.dumps([DNS_ADDRESS]),
        WEBFETCH_TEST_CA_FILE=ca_file,
        WEBFETCH_TEST_SWEEP_EVERY="15",
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from django_webfetch.models import ConfiguredEndpoint, ToolGroup

    call_command("migrate", verbosity=0)
    group = ToolGroup.objects.get(slug="assistant")
    group.enabled = True
    group.save()
    ConfiguredEndpoint.objects.create(
        group=group,
        name="bench provider",
        base_url=f"https://{HOST}:{PORT}/openai/v1",
        provider_kind="openai-compatible",
        model_name="bench-model",
        auth_header_value="sk-bench",
    )
    user = get_user_model().objects.create_user("bench", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    cookies = {"sessionid": client.cookies["sessionid"].value, "csrftoken": CSRF}
    return ProviderServer(PROVIDER_ADDRESS, context), ca_file, cookies


def _one_run(provider: Any, url: str, cookies: dict[str, str]) -> dict[str, Any]:
    import httpx

    from tests.assistant.provider import Turn

    provider.reset()
    provider.add(Turn(text=TEXT, chunk=CHUNK, chunk_delay=CHUNK_DELAY, delay=THINK))
    with httpx.Client(base_url=url, cookies=cookies, timeout=120) as client:
        conversation = new_conversation(client)
        start = time.monotonic()
        posted = post_message(client, "bench", conversation)
        held = time.monotonic() - start
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["id"]
        # The baseline request: the run's detail, a small authenticated read.
        start_read = time.monotonic()
        assert client.get(f"/api/runs/{run_id}/").status_code == 200
        read = time.monotonic() - start_read
        first = None
        latencies: list[float] = []
        deltas = 0
        text = ""
        with client.stream("GET", f"/api/runs/{run_id}/stream/") as response:
            kind = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "text_delta":
                    now = time.monotonic()
                    if first is None:
                        first = now - start
                    deltas += 1
                    text += json.loads(line[6:])["data"]["text"]
                    written = [t for n, t in provider.written if n >= len(text)]
                    if written:
                        latencies.append(now - written[0])
                elif line.startswith("data: ") and kind in ("completed", "failed"):
                    break
    assert text == TEXT or deltas == 0, "the streamed text differs from the answer"
    return {
        "held": held,
        "read": read,
        "first": first if first is not None else float("nan"),
        "latencies": latencies,
        "deltas": deltas,
        "chunks": len(provider.written),
    }


def _report(mode: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    held = statistics.median(r["held"] for r in runs)
    read = statistics.median(r["read"] for r in runs)
    first = statistics.median(r["first"] for r in runs)
    latencies = sorted(x for r in runs for x in r["latencies"])
    median = statistics.median(latencies) if latencies else float("nan")
    worst = latencies[-1] if latencies else float("nan")
    deltas = statistics.median(r["deltas"] for r in runs)
    chunks = statistics.median(r["chunks"] for r in runs)
    print(
        f"{mode:10}  POST held {held * 1e3:7.1f} ms"
        f" (longest {max(r['held'] for r in runs) * 1e3:7.1f}; GET run {read * 1e3:6.1f} ms,"
        f" ratio {held / read:5.1f}x)"
        f"  first delta {first * 1e3:8.1f} ms  delta latency median {median * 1e3:6.1f} ms"
        f" worst {worst * 1e3:6.1f} ms  deltas/run {deltas:.0f} for {chunks:.0f} chunks",
        flush=True,
    )
    return {"held": held, "first": first}


def main(argv: list[str] | None = None) -> None:
    if not in_namespace("tests.benchmarks.bench_streaming"):
        return
    sys.setswitchinterval(0.001)
    with tempfile.TemporaryDirectory(prefix="webfetch-bench-stream-") as workdir:
        provider, _ca, cookies = _setup(workdir)
        from django.test import override_settings

        results = {}
        from django_webfetch.runs.runner import start_serving

        with uvicorn_in_a_thread() as url:
            start_serving()
            _one_run(provider, url, cookies)  # warm-up (imports, TLS, the SDK)
            for mode in ("background", "inline"):
                with override_settings(WEBFETCH_RUNNER=mode):
                    runs = [_one_run(provider, url, cookies) for _ in range(ROUNDS)]
                results[mode] = _report(mode, runs)
        background, inline = results["background"], results["inline"]
        print(
            f"POST held: inline / background = {inline['held'] / background['held']:.0f}x;"
            f" first delta: inline / background = {inline['first'] / background['first']:.2f}x"
        )
        provider.stop()


if __name__ == "__main__":
    main()
