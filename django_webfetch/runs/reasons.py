"""Stable reason codes in plain words, for people: the one table the assistant page, the
approval cards and the offline planner's answers read.

The codes are the guard's rules (``net.errors``) and the run service's outcomes; an unknown
code is shown as it is, so nothing is hidden.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

__all__ = ["ADDRESS_CLASSES", "FAILURE_CODES", "REASONS", "REFUSALS", "is_refusal", "plain_reason"]

REASONS = {
    # the guard's rules (DESIGN.md §3)
    "scope": _("this tool group may not reach that kind of destination"),
    "scheme": _("only http and https addresses can be read"),
    "userinfo": _("addresses with a user name or password are refused"),
    "idn": _("international (non-ASCII) host names are refused; use the xn-- form"),
    "host_syntax": _("the host name is malformed"),
    "invalid_url": _("the address is not a valid web address"),
    "legacy_numeric_host": _("numeric host forms like 2130706433 or 0x7f.1 are refused"),
    "own_site": _(
        "this address is this site itself, which is not read as an external page "
        "(ask about its path, for example /about/, to read it as one of the site's pages)"
    ),
    "denylist": _("the host is on the administrator's deny list"),
    "not_allowlisted": _("the host is not on the administrator's allow list"),
    "host_spells_address": _(
        "the host name spells the address it resolves to (wildcard DNS), which a *. grant "
        "does not cover"
    ),
    "port": _("only the default port is allowed unless the allow list names the port"),
    "proxy": _("a proxy would carry this request, which the guard cannot check"),
    "unresolvable": _("the host name does not resolve to an address"),
    "mixed_answer": _("the host resolves to both public and private addresses"),
    "address_class": _("the host resolves to a non-public address"),
    "policy_unavailable": _("the tool group's settings could not be read"),
    "invalid_list": _("the administrator's host list is invalid, so everything is refused"),
    "redirect": _("the page redirected somewhere that is refused"),
    "redirect_limit": _("the page redirected too often"),
    "timeout": _("the page took too long to answer"),
    "too_large": _("the page is larger than the download limit"),
    "media_type": _("the page is not HTML or plain text"),
    "content_encoding": _("the page uses an unsupported compression"),
    "fetch_error": _("the page could not be fetched"),
    "dns_error": _("the name server did not answer properly"),
    "extraction_error": _("the page's text could not be extracted"),
    # the error codes of a tool result, when no rule is named
    "egress_denied": _("the egress guard refused the address"),
    "host_not_allowed": _("the egress guard refused the host"),
    "address_not_allowed": _("the host resolves to a non-public address"),
    "scheme_not_allowed": _("only http and https addresses can be read"),
    "port_not_allowed": _("only the default port is allowed unless the allow list names the port"),
    "http_status": _("the server answered with an error status"),
    "approval_required": _("the call needs an approval"),
    # the run service's outcomes
    "approval_denied": _("an approver denied the request"),
    "approval_expired": _("nobody approved the request in time"),
    "cancelled": _("the request was cancelled"),
    "tool_not_offered": _("this tool is not enabled for you"),
    "tool_unavailable": _("this tool is not enabled for you"),
    "unknown_tool": _("there is no such tool"),
    "invalid_arguments": _("the tool was called with invalid arguments"),
    "worker_lost": _("the worker running the request stopped"),
    "internal_error": _("the tool failed unexpectedly"),
    "page_not_found": _("there is no published page with that id or path that you may view"),
    "too_many_calls": _("the assistant asked for more tool calls than one answer may make"),
    "destination_busy": _("too many requests to that host are running; try again shortly"),
    "destination_limit_unavailable": _(
        "the limit of requests per host could not be checked, so nothing was sent"
    ),
    # budgets (``budget_exceeded:<ceiling>``)
    "budget_exceeded": _("a budget is used up; an administrator can raise it"),
    "budget_exceeded:tool_calls_per_day": _(
        "the budget of tool calls for today is used up; an administrator can raise it"
    ),
    "budget_exceeded:tool_calls_per_month": _(
        "the budget of tool calls for this month is used up; an administrator can raise it"
    ),
    "budget_exceeded:provider_requests_per_day": _(
        "the budget of assistant requests for today is used up; an administrator can raise it"
    ),
    "budget_exceeded:provider_requests_per_month": _(
        "the budget of assistant requests for this month is used up; an administrator can raise it"
    ),
    "budget_exceeded:provider_tokens_per_day": _(
        "the budget of model tokens for today is used up; an administrator can raise it"
    ),
    "budget_exceeded:provider_tokens_per_month": _(
        "the budget of model tokens for this month is used up; an administrator can raise it"
    ),
    "budget_exceeded:cost_per_day": _(
        "the budget of model cost for today is used up; an administrator can raise it"
    ),
    "budget_exceeded:cost_per_month": _(
        "the budget of model cost for this month is used up; an administrator can raise it"
    ),
}

#: The codes of a refusal: a rule or a person decided the call may not run (or may not
#: reach where it asked): the guard's rules and refusal codes, an approver's decision,
#: the run service's bounds.  A code with a ``:`` detail is classified by its head
#: (``address_class:private``, ``budget_exceeded:cost_per_day``).
REFUSALS = frozenset(
    {
        # the guard's rules
        "scope", "scheme", "userinfo", "idn", "host_syntax", "invalid_url",
        "legacy_numeric_host", "own_site", "denylist", "not_allowlisted",
        "host_spells_address", "port", "proxy", "unresolvable", "mixed_answer",
        "address_class", "policy_unavailable", "invalid_list", "redirect",
        # the guard's error codes
        "egress_denied", "host_not_allowed", "address_not_allowed", "scheme_not_allowed",
        "port_not_allowed", "approval_required", "egress_not_granted",
        # a person's decision, or nobody's in time
        "approval_denied", "approval_expired",
        # the run service's rules and bounds
        "tool_not_offered", "tool_unavailable", "unknown_tool", "invalid_arguments",
        "too_many_calls", "destination_busy", "destination_limit_unavailable",
        "budget_exceeded",
    }
)  # fmt: skip

#: The codes of a failure: the call ran (the guard allowed it) and something went wrong on
#: the way (the network, the server, the page, the worker).  ``meta.failure`` says why in
#: more detail where there is one (``net.failures``).
FAILURE_CODES = frozenset(
    {
        "timeout", "too_large", "media_type", "content_encoding", "fetch_error", "dns_error",
        "extraction_error", "http_status", "redirect_limit", "worker_lost",
        "internal_error", "page_not_found", "plugin_error", "cancelled",
    }
)  # fmt: skip


def is_refusal(state: str, code: str) -> bool:
    """Whether a finished call in ``state`` with reason ``code`` was refused (not failed):
    denied and expired calls always; a failed call when its code is a refusal's."""
    if state in ("denied", "expired"):
        return True
    return state == "failed" and str(code or "").split(":", 1)[0] in REFUSALS


ADDRESS_CLASSES = {
    "loopback": _("a loopback address"),
    "private": _("a private network address"),
    "link_local": _("a link-local address"),
    "metadata": _("a cloud metadata address"),
    "cgnat": _("a carrier-grade NAT address"),
    "documentation": _("a documentation address"),
}


def plain_reason(code: str) -> str:
    """``code`` in plain words (``address_class:private`` names the class)."""
    code = str(code or "")
    if code.startswith("address_class:"):
        kind = code.split(":", 1)[1]
        named = ADDRESS_CLASSES.get(kind)
        if named is not None:
            return str(_("the host resolves to %(kind)s") % {"kind": named})
        return str(REASONS["address_class"]) + f" ({kind})"
    if code.startswith("http_"):
        return str(_("the server answered with HTTP status %(status)s") % {"status": code[5:]})
    text = REASONS.get(code)
    return str(text) if text is not None else code
