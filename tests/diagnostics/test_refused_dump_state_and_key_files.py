"""Files that hold the database or live credentials are refused by read_source and
search_code although neither their name nor their first bytes look like SQL or a key:

- ``manage.py dumpdata`` output (Django's own dump format, JSON; ``data.json``,
  ``fixtures/prod.json``): password hashes and live ``django_session`` keys;
- ``terraform.tfstate`` (and ``.tfstate.backup``): every resource's secrets in clear;
- a Google service-account key file (``"type": "service_account"``) under any name.

Each is refused (``database_file`` / ``key_material``), as ``backup.sql`` is.
"""

from __future__ import annotations

import pytest

from django_webfetch.diagnostics.paths import PathDenied, SourcePathGuard

DUMPDATA = (
    b'[{"model": "auth.user", "pk": 1, "fields": {"password": "pbkdf2_sha256$870000$salt$hash",'
    b' "username": "admin", "is_superuser": true}},\n'
    b'{"model": "sessions.session", "pk": "8m1x0k4t1c2y3z", "fields": {"session_data": "e30"}}]\n'
)
TFSTATE = b'{\n  "version": 4,\n  "terraform_version": "1.7.0",\n  "resources": []\n}\n'
SERVICE_ACCOUNT = (
    b'{\n  "type": "service_account",\n  "project_id": "p",\n  "private_key_id": "0a1b",\n'
    b'  "client_email": "x@p.iam.gserviceaccount.com"\n}\n'
)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("data.json", DUMPDATA),
        ("fixtures_prod.json", DUMPDATA),
        ("terraform.tfstate", TFSTATE),
        ("terraform.tfstate.backup", TFSTATE),
        ("gcp-deployer.json", SERVICE_ACCOUNT),
    ],
    ids=["dumpdata", "fixture", "tfstate", "tfstate_backup", "service_account"],
)
def test_dumps_state_and_key_files_are_refused(tmp_path, name, body):
    (tmp_path / name).write_bytes(body)
    guard = SourcePathGuard(str(tmp_path))
    with pytest.raises(PathDenied):
        real, _ = guard.resolve(name)
        guard.open(real).close()
