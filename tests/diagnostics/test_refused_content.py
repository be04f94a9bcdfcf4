"""review19 finding 4: files that hold the database or live credentials are refused by name
or by their first 4 KiB (``SourcePathGuard.open``), whatever they are called; ordinary JSON,
YAML and XML stay readable."""

from __future__ import annotations

import pytest

from django_webfetch.diagnostics.paths import PathDenied, SourcePathGuard, sniff_reason
from django_webfetch.diagnostics.search import CodeSearch


def _refusal(tmp_path, name, body):
    (tmp_path / name).write_bytes(body)
    guard = SourcePathGuard(str(tmp_path))
    try:
        real, _ = guard.resolve(name)
        guard.open(real).close()
    except PathDenied as exc:
        return exc.reason
    return None


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'[{"model": "auth.user", "pk": 1, "fields": {"password": "pbkdf2"}}]', "database_file"),
        (b'[\n{\n    "model": "sessions.session",\n    "pk": "k"', "database_file"),
        (b'{"model": "auth.user", "pk": 1, "fields": {}}\n', "database_file"),  # jsonl
        (b"- model: auth.user\n  pk: 1\n  fields: {password: pbkdf2}\n", "database_file"),
        (
            b'<?xml version="1.0" encoding="utf-8"?>\n<django-objects version="1.0">'
            b'<object model="auth.user" pk="1">',
            "database_file",
        ),
        (b'{\n  "version": 4,\n  "terraform_version": "1.7.0"\n}', "database_file"),
        (b'{\n  "type": "service_account",\n  "project_id": "p"\n}', "key_material"),
        (b'{"client_email": "x@p", "private_key": "-----BEGIN"}', "key_material"),
    ],
    ids=["dumpdata", "dumpdata_indent", "jsonl", "yaml", "xml", "tfstate", "sa", "pkey"],
)
def test_dumps_state_and_keys_are_refused_by_content(tmp_path, body, reason):
    assert sniff_reason(body) == reason
    assert _refusal(tmp_path, "notes.txt", body + b'\n"pbkdf2_needle"\n') == reason
    outcome = CodeSearch(SourcePathGuard(str(tmp_path))).search("pbkdf2_needle")
    assert outcome.hits == [] and outcome.files_skipped == 1


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("terraform.tfstate", "database_file"),
        ("terraform.tfstate.backup", "database_file"),
        ("prod.tfvars", "key_material"),
        ("x.auto.tfvars.json", "key_material"),
        ("id_rsa_old", "key_material"),
        ("id_ed25519-deploy", "key_material"),
        ("netrc", "key_material"),
        ("pgpass", "key_material"),
        ("htpasswd", "key_material"),
        ("service-account.json", "key_material"),
        ("server.key", "key_material"),
        ("cert.p12", "key_material"),
        ("cert.pfx", "key_material"),
        ("tls.pem", "key_material"),
        ("credentials.json", "credential_name"),
        (".netrc", "dot_segment"),
        (".pgpass", "dot_segment"),
        (".htpasswd", "dot_segment"),
    ],
)
def test_state_and_credential_files_are_refused_by_name(tmp_path, name, reason):
    assert _refusal(tmp_path, name, b"x\n") == reason


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("package.json", b'{"name": "x", "version": "1.0.0"}'),
        ("llm.json", b'{"model": "gpt-4o", "temperature": 0}'),
        ("list.json", b'[{"name": "model", "value": 1}]'),
        ("ci.yml", b"- name: model\n  run: make\n"),
        ("page.xml", b'<?xml version="1.0"?><objects/>'),
        ("main.tf", b'terraform {\n  required_version = ">= 1.7"\n}\n'),
    ],
)
def test_ordinary_data_files_stay_readable(tmp_path, name, body):
    assert sniff_reason(body) is None
    assert _refusal(tmp_path, name, body) is None
