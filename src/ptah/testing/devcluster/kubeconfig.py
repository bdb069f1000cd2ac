"""Kubeconfig files for the local cluster's clients (embedded certificates)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from ptah.testing.devcluster.pki import Pki


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def render(server: str, pki: Pki, client: str, cluster_name: str = "ptah-dev") -> str:
    """A kubeconfig for ``client`` (a name in pki.CLIENTS) against ``server``."""
    user = f"{cluster_name}-{client}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(pki.ca_crt),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(pki.crt(client)),
                    "client-key-data": _b64(pki.key(client)),
                },
            }
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: Path, server: str, pki: Pki, client: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(server, pki, client))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path
