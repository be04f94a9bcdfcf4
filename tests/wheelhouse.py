"""A local wheel index rebuilt from the test environment, so that a clean virtual environment
can ``pip install --no-index --find-links`` a requirement *with its dependencies* offline.

Each distribution installed in the test environment is packed back into a wheel from the files
its ``RECORD`` lists (scripts outside site-packages left out: pip writes console scripts from
``entry_points.txt`` again), under the tag its ``WHEEL`` file names.  Only the dependency
closure of the requirement is packed, walked from the declared ``Requires-Dist`` of each
distribution with markers evaluated for the requested extras.  So pip installs exactly what
the metadata declares: a dependency that a package imports but does not declare is missing
in the clean environment, as it would be on a user's machine.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_DROPPED_DIST_INFO = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def requirements_of(meta: Any, extras: set[str]) -> list[Requirement]:
    """The ``Requires-Dist`` entries that apply with ``extras`` requested."""
    wanted: list[Requirement] = []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or any(
            req.marker.evaluate({"extra": extra}) for extra in (extras or {""})
        ):
            wanted.append(req)
    return wanted


def closure(roots: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution that ``roots`` need, by canonical name."""
    found: dict[str, metadata.Distribution] = {}
    extras_seen: dict[str, set[str]] = {}
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        extras = set(req.extras)
        if name in found and extras <= extras_seen[name]:
            continue
        dist = found.get(name) or metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (req, dist.version)
        found[name] = dist
        extras_seen[name] = extras_seen.get(name, set()) | extras
        todo.extend(requirements_of(dist.metadata, extras_seen[name]))
    return found


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def repack(dist: metadata.Distribution, outdir: Path) -> Path:
    """Write ``dist`` (installed) back into a wheel in ``outdir``."""
    info = Path(str(dist._path))  # type: ignore[attr-defined]  # the .dist-info directory
    assert info.name.endswith(".dist-info"), info
    stem = info.name[: -len(".dist-info")]
    tags = re.findall(r"^Tag: (\S+)$", (info / "WHEEL").read_text(), re.MULTILINE)
    # The file name carries the compressed tag set (``py2.py3-none-any``, PEP 425).
    parts = [list(dict.fromkeys(tag.split("-")[i] for tag in tags)) for i in range(3)]
    wheel = outdir / f"{stem}-{'-'.join('.'.join(p) for p in parts)}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for entry in dist.files or ():
            parts = entry.parts
            if parts[0] == ".." or "__pycache__" in parts or entry.suffix == ".pyc":
                continue
            if parts[0] == info.name and parts[-1] in _DROPPED_DIST_INFO:
                continue
            path = Path(str(dist.locate_file(entry)))
            if not path.is_file():
                continue
            data = path.read_bytes()
            arcname = "/".join(parts)
            archive.writestr(arcname, data)
            record.append(_record_line(arcname, data))
        record.append(f"{info.name}/RECORD,,")
        archive.writestr(f"{info.name}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_wheelhouse(project_wheel: Path, extras: set[str], outdir: Path) -> list[Path]:
    """Pack the dependency closure of ``project_wheel[extras]`` into ``outdir``."""
    with zipfile.ZipFile(project_wheel) as archive:
        [meta_name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(archive.read(meta_name).decode())
    roots = requirements_of(meta, extras)
    return [repack(dist, outdir) for dist in closure(roots).values()]
