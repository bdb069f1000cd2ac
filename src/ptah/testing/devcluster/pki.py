"""A throwaway PKI for one local cluster: CA, serving and client certificates, SA key."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True)
class Pki:
    """Paths of every PEM file under ``<state>/pki``."""

    root: Path

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def ca_crt(self) -> Path:
        return self.path("ca.crt")

    @property
    def ca_key(self) -> Path:
        return self.path("ca.key")

    @property
    def sa_key(self) -> Path:
        return self.path("sa.key")

    @property
    def sa_pub(self) -> Path:
        return self.path("sa.pub")

    def crt(self, name: str) -> Path:
        return self.path(f"{name}.crt")

    def key(self, name: str) -> Path:
        return self.path(f"{name}.key")


# name -> (common name, organisations, is_server)
CLIENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    # kubectl, tests and the node agent: cluster-admin through the system:masters group.
    "admin": ("ptah-admin", ("system:masters",)),
    # kube-controller-manager; with --use-service-account-credentials each controller
    # then acts as its own service account in kube-system.
    "controller-manager": ("system:kube-controller-manager", ()),
    # the apiserver's identity towards the node agent's kubelet port.
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
    # the real node: the kubelet as system:node:<name> (Node authoriser, NodeRestriction)
    # and kube-scheduler with its built-in RBAC role.
    "kubelet-client": ("system:node:ptah-local", ("system:nodes",)),
    "scheduler": ("system:kube-scheduler", ()),
}
SERVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "apiserver": (
        "kube-apiserver",
        (
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
    ),
    "kubelet": ("ptah-local", ("localhost",)),
}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)


def ensure(pki: Pki, server_ips: tuple[str, ...] = ()) -> Pki:
    """Create whatever of the PKI is missing; existing files are kept.

    ``server_ips``: more addresses the serving certificates must name (the real node's
    bridge address, where the apiserver and the kubelet listen); a serving certificate
    that lacks one is issued anew.
    """
    pki.root.mkdir(parents=True, exist_ok=True)
    if not pki.ca_crt.exists() or not pki.ca_key.exists():
        ca_key = _key()
        ca_name = _name("ptah-local-ca")
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now())
            .not_valid_after(_now() + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write_key(pki.ca_key, ca_key)
        pki.ca_crt.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    ca_cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    ca_priv = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(ca_priv, ec.EllipticCurvePrivateKey)

    for name, (cn, orgs) in CLIENTS.items():
        if not pki.crt(name).exists():
            _issue(pki, name, ca_cert, ca_priv, _name(cn, orgs), server_names=None)
    for name, (cn, dns) in SERVERS.items():
        if not pki.crt(name).exists() or not _names_ips(pki.crt(name), server_ips):
            _issue(pki, name, ca_cert, ca_priv, _name(cn), server_names=dns, ips=server_ips)

    if not pki.sa_key.exists():
        sa = _key()
        _write_key(pki.sa_key, sa)
        pki.sa_pub.write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return pki


def _names_ips(crt: Path, ips: tuple[str, ...]) -> bool:
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return all(ip in have for ip in ips)


def _issue(
    pki: Pki,
    name: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    server_names: tuple[str, ...] | None,
    ips: tuple[str, ...] = (),
) -> None:
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if server_names is None:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    else:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in server_names]
        sans += [
            x509.IPAddress(ipaddress.ip_address(ip))
            for ip in dict.fromkeys(("127.0.0.1", "10.96.0.1", *ips))
        ]
        builder = builder.add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        ).add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pki.key(name), key)
    pki.crt(name).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
