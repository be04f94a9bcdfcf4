"""The host-owned client: the only way a plugin reaches the network (DESIGN.md §8).

``PluginHttp`` is a small httpx-like API (``get``/``post``/``request``) on the one
``GuardedTransport``.  For every request it:

1. re-reads the instance row and its effective grant (declaration ∩ operator grant) from
   the database; no grant: refused (``egress_not_granted``), nothing resolved;
2. takes a slot of the instance's connection budget (shared through Redis when set);
3. sends through the guarded transport with the instance's policy (the full guard, DNS
   through dnspython, pinned connection), never following a redirect: a 3xx is returned
   to the plugin, and a follow-up is a new request, checked again;
4. reads the body under ``WEBFETCH_MAX_RESPONSE_BYTES`` and releases the slot.

A refusal reaches the plugin as a redacted ``EgressDenied`` whose ``reason`` names only the
policy (``egress_not_granted``, ``address_class``, ``denylist``, ...), with no address, URL
or detail, and with no chained exception to dig the detail out of.  The full detail is an
``EgressEvent`` recorded against the instance.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from django_webfetch.conf import conf
from django_webfetch.egress import EgressRecorder, policy_for
from django_webfetch.net.errors import (
    EgressDenied,
    FetchError,
    FetchTimeout,
    ResolutionError,
    ResponseTooLarge,
    WebFetchError,
)
from django_webfetch.net.foreign import foreign_errors
from django_webfetch.net.policy import EgressPolicy, Scope
from django_webfetch.net.rawurl import stamp, syntax_verdict
from django_webfetch.net.transport import Cancellation
from django_webfetch.tools.base import ToolResult

from .budget import LEASE_MARGIN, budget_for
from .sandbox import current_scope, host_io

__all__ = [
    "PLUGIN_REASONS",
    "REQUEST_FAILURES",
    "PluginHttp",
    "plugin_reason",
    "reported_failure",
    "reported_refusal",
]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: Guard reason -> the policy name a plugin is told.
_EXACT = {
    "not_allowlisted": "egress_not_granted",
    "egress_not_granted": "egress_not_granted",
    "scope": "egress_not_granted",
    "mixed_answer": "address_class",
    "denylist": "denylist",
    "own_site": "own_site",
    "port": "port",
    "scheme": "scheme",
    "proxy": "proxy",
    "unresolvable": "unresolvable",
    "connection_budget": "connection_budget",
    "connection_budget_unavailable": "connection_budget",
    "invalid_list": "policy_unavailable",
    "policy_unavailable": "policy_unavailable",
    "unguarded_network": "unguarded_network",
    "host_spells_address": "host_spells_address",
}


def plugin_reason(reason: str) -> str:
    """The policy a refusal is attributed to, as the plugin may see it."""
    if reason.startswith("address_class"):
        return "address_class"
    if reason in _EXACT:
        return _EXACT[reason]
    return "invalid_url"  # host_syntax, idn, userinfo, legacy_numeric_host, invalid_url...


#: Every refusal reason a plugin is told (``plugin_reason``).
PLUGIN_REASONS = frozenset({*_EXACT.values(), "address_class", "invalid_url"})
#: The codes of the errors this client raises in a plugin (``_redacted``): the only
#: request failures a failed plugin call's message names.
REQUEST_FAILURES = frozenset(
    kind.code
    for kind in (FetchTimeout, ResponseTooLarge, FetchError, ResolutionError, WebFetchError)
)


def reported_failure(code: object) -> ToolResult:
    """The failed result of a call whose tool raised a ``WebFetchError`` (the plugin's
    report, in or out of its process): its code is ``plugin_error`` whatever the plugin's
    says; the message names the plugin's code only when it is one of ``REQUEST_FAILURES``
    (issue 30 attack 6, finding 8: a plugin chose the call's code, up to 100 characters,
    past ``ToolCall.reason``'s 64, or one of the site's own)."""
    said = code if isinstance(code, str) and code in REQUEST_FAILURES else "other"
    return ToolResult.failure(
        "plugin_error", f"The plugin's tool failed: a request of it failed ({said}).", request=said
    )


def reported_refusal(reason: object) -> ToolResult:
    """The failed result of a call whose tool raised ``EgressDenied``: the guard's code
    (``egress_denied``) with the plugin's reason only when it is one a plugin is told
    (``PLUGIN_REASONS``), else ``egress_denied``."""
    said = reason if isinstance(reason, str) and reason in PLUGIN_REASONS else "egress_denied"
    return ToolResult.from_exception(EgressDenied(said))


def _redacted(exc: WebFetchError) -> WebFetchError:
    if isinstance(exc, EgressDenied):
        return EgressDenied(plugin_reason(exc.reason))
    for kind in (FetchTimeout, ResponseTooLarge, FetchError, ResolutionError):
        if isinstance(exc, kind):
            return kind()
    return WebFetchError()


def _text_map(value: Any, what: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in value.items()
    ):
        raise TypeError(f"{what} must be a mapping of strings")
    return {k: str(v) for k, v in value.items()}


class PluginHttp:
    """The host-owned client of one plugin instance.  Cheap; make one per tool call."""

    def __init__(
        self,
        instance_id: int,
        *,
        group: str | None = None,
        tool: str = "",
        call_id: str = "",
        user: Any = None,
    ) -> None:
        self._instance_id = instance_id
        self._group = group
        self._tool = tool
        self._call_id = call_id
        self._user = user

    def __repr__(self) -> str:
        return f"<PluginHttp instance={self._instance_id}>"

    # -- the httpx-like API ------------------------------------------------------------------

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | str | None = None,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> httpx.Response:
        """Send one request; return the response with its body read (a 3xx included).

        ``timeout`` (seconds, at most ``WEBFETCH_TIMEOUT``) bounds the whole request;
        ``deadline`` (a ``time.monotonic()``: the plugin runtime's call deadline) ends it
        by then whatever its timeout (``FetchTimeout``), the wait for a budget slot
        included.  ``cancellation`` (the plugin runtime's call: ``runtime.host``) ends it
        from another thread when the call ends, whatever ended it: its connection is shut
        at once and the failed hop is recorded ``plugin_call_ended``.

        Raises a redacted ``EgressDenied`` (``.reason`` names the policy), or
        ``FetchError``/``FetchTimeout``/``ResponseTooLarge``/``ResolutionError`` without
        detail.
        """
        failure: WebFetchError | None = None
        with host_io():
            try:
                return self._send(
                    method,
                    url,
                    params,
                    headers,
                    content,
                    json,
                    data,
                    timeout,
                    deadline,
                    cancellation,
                )
            except WebFetchError as exc:
                failure = _redacted(exc)
        # Raised outside the ``except`` block: no ``__context__`` carries the detail.
        raise failure

    # -- internals ---------------------------------------------------------------------------

    def _recorder(self, instance: Any, group: str) -> EgressRecorder:
        return EgressRecorder(
            tool=self._tool or "plugin",
            group=group,
            user=self._user,
            plugin_instance=instance,
            call_id=self._call_id,
        )

    def _build(
        self,
        method: str,
        url: str,
        params: Any,
        headers: Any,
        content: Any,
        json: Any,
        data: Any,
    ) -> httpx.Request:
        method_obj: object = method
        url_obj: object = url
        if not isinstance(method_obj, str) or method_obj.upper() not in _METHODS:
            raise EgressDenied("invalid_url", detail="unsupported method")
        if not isinstance(url_obj, str):
            raise EgressDenied("invalid_url", detail="the URL must be a string")
        if content is not None and not isinstance(content, (bytes, str)):
            # A generator or file would run plugin code inside the guarded transport.
            raise TypeError("content must be bytes or str")
        try:
            request = httpx.Request(
                method.upper(),
                url,
                params=_text_map(params, "params"),
                headers=_text_map(headers, "headers"),
                content=content,
                json=json,
                data=_text_map(data, "data"),
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, UnicodeError) as exc:
            # The guard's verdict on the plugin's string (``port``, ``idn``, ...), as
            # ``net.fetch`` would give it, never httpx's.
            raise syntax_verdict(url) from exc
        except ValueError as exc:
            raise EgressDenied("invalid_url", detail=type(exc).__name__) from exc
        # The guard decides on the plugin's string, not on httpx's normalised parse of it.
        stamp(request, url)
        request.read()  # the body is bytes from here on
        return request

    def _send(
        self,
        method: str,
        url: str,
        params: Any,
        headers: Any,
        content: Any,
        json: Any,
        data: Any,
        timeout: float | None,
        deadline: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> httpx.Response:
        host = _host_of(url)
        scope = current_scope()
        if scope is not None:
            # Inside a tool call the runner's labels decide (group, tool, call, user), never
            # this object's attributes: plugin code can set those, or build a client itself.
            self._group, self._tool = scope.group or None, scope.tool
            self._call_id, self._user = scope.call_id, scope.user
        try:
            instance = self._instance()
        except EgressDenied as exc:
            recorder = self._recorder(f"plugin-instance#{self._instance_id}", self._group or "")
            recorder.record_exception(exc, url_host=host)
            raise
        group = self._group or (instance.default_group() if instance is not None else "")
        recorder = self._recorder(instance if instance is not None else None, group)
        # One guarded call that records its own failure (``EgressRecorder.guarded``): a
        # refusal before the transport (no grant, no budget slot) is recorded here, one the
        # transport reported is not recorded twice.
        with recorder.guarded(url_host=host):
            request = self._build(method, url, params, headers, content, json, data)
            policy = self._policy(group)  # fail fast: no grant, no budget slot, no DNS
            limit = _time_limit(timeout, policy.total_timeout, deadline)
            lease = budget_for(conf.WEBFETCH_PLUGIN_REDIS_URL).acquire(
                f"{self._instance_id}",
                conf.WEBFETCH_PLUGIN_MAX_CONNECTIONS,
                wait=min(policy.connect_timeout, limit),
                ttl=policy.total_timeout + LEASE_MARGIN,
            )
            try:
                # What is left of it once a slot is free (the wait counts).
                return self._transmit(
                    request,
                    group,
                    recorder,
                    _time_limit(timeout, policy.total_timeout, deadline),
                    cancellation,
                )
            finally:
                lease.release()

    def _transmit(
        self,
        request: httpx.Request,
        group: str,
        observe: Any,
        timeout: float | None,
        cancellation: Cancellation | None = None,
    ) -> httpx.Response:
        from django_webfetch.net.guarded import GuardedClient, GuardedTransport

        transport = GuardedTransport(
            # Called by the transport for this request: the grant as of now.
            lambda _request: self._policy(group),
            observer=observe,
            max_response_bytes=conf.WEBFETCH_MAX_RESPONSE_BYTES,
            timeout=timeout,
            cancellation=cancellation,
        )
        with (
            foreign_errors(),
            GuardedClient(transport, follow_redirects=False, trust_env=False) as client,
        ):
            response = client.send(request, follow_redirects=False)
            try:
                response.read()
            finally:
                response.close()
        return response

    def _instance(self) -> Any:
        """The instance row as of now; a database error refuses (fail closed)."""
        from django.db import DatabaseError

        from .models import PluginInstance

        try:
            return PluginInstance.objects.filter(pk=self._instance_id).first()
        except DatabaseError as exc:
            raise EgressDenied(
                "policy_unavailable", detail=f"plugin instance unreadable: {type(exc).__name__}"
            ) from exc

    def _policy(self, group: str) -> EgressPolicy:
        """The instance's live policy; raises ``EgressDenied`` when it grants nothing."""
        instance = self._instance()
        if instance is None:
            raise EgressDenied("egress_not_granted", detail="the plugin instance is gone")
        scope = current_scope()
        if scope is not None and scope.reference != instance.reference:
            # A tool running for one instance cannot borrow another instance's grant.
            raise EgressDenied(
                "egress_not_granted",
                detail=f"the client of {instance.reference} used by {scope.reference}",
            )
        if not instance.enabled:
            raise EgressDenied("egress_not_granted", detail=f"{instance.reference} is disabled")
        if group not in _groups_of(instance):
            # A group none of the plugin's tools is in (one without the denylist).
            raise EgressDenied(
                "egress_not_granted",
                detail=f"group {group!r} is not a group of {instance.reference}'s tools",
            )
        if not instance.effective():
            raise EgressDenied(
                "egress_not_granted", detail=f"{instance.reference} has no effective grant"
            )
        policy = policy_for(group, plugin_instance=instance, user=self._user)
        if policy.scope is Scope.NONE:
            raise EgressDenied(
                "egress_not_granted",
                detail=f"group {group!r} gives {instance.reference} no egress",
            )
        return policy


def _time_limit(timeout: Any, total: float, deadline: float | None) -> float:
    """The seconds a request may take: the plugin's ``timeout`` (positive; at most
    ``WEBFETCH_TIMEOUT``) or the policy's ``total``, and never past ``deadline``."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise EgressDenied("invalid_url", detail="timeout must be positive")
    limit = float(min(timeout, conf.WEBFETCH_TIMEOUT)) if timeout else total
    if deadline is not None:
        limit = min(limit, deadline - time.monotonic())
        if limit <= 0:
            raise FetchTimeout(detail="the call's time ran out")
    return limit


def _groups_of(instance: Any) -> frozenset[str]:
    from .manifest import tool_group
    from .registry import get_manifest

    manifest = get_manifest(instance.plugin)
    groups = {tool_group(manifest, spec) for spec in manifest.tools} if manifest else set()
    return frozenset({*groups, instance.default_group()})


def _host_of(url: Any) -> str:
    from django_webfetch.egress import requested_host

    return requested_host(url)[0] if isinstance(url, str) else ""
