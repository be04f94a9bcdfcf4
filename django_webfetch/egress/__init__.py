"""The egress policy service: the only layer joining the models to ``net/``.

One authority for tools and plugins: ``policy_for`` builds the live ``EgressPolicy`` of a
tool group, ``EgressRecorder`` writes the audit log (and ``EgressRecorder.guarded`` records
the failure of a guarded call that the guard did not report itself).
"""

from __future__ import annotations

from .policy import (
    ENDPOINT_MEDIA_TYPES,
    PluginEgressGrant,
    PluginGrant,
    client_metadata_policy,
    endpoint_policy,
    endpoint_verdict,
    own_site_base,
    own_site_hosts,
    policy_for,
    site_domain_entry,
)
from .recorder import EgressRecorder, plugin_reference, requested_host

__all__ = [
    "ENDPOINT_MEDIA_TYPES",
    "EgressRecorder",
    "PluginEgressGrant",
    "PluginGrant",
    "client_metadata_policy",
    "endpoint_policy",
    "endpoint_verdict",
    "own_site_base",
    "own_site_hosts",
    "plugin_reference",
    "policy_for",
    "requested_host",
    "site_domain_entry",
]
