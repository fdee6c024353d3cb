"""TLS: a broker and a NameServer serving HTTPS with a certificate the test makes.

A throw-away CA signs a certificate for 127.0.0.1; clients that are given the
CA file (Python client, CLI, the broker's registration) connect, those that
are not are refused by certificate verification.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker_api.client import BrokerUnreachableError, SparkMQClient
from broker_api.client.auth import trust
from streaming.auth import Trust
from streaming.client import BrokerClient as StreamingClient
from streaming.errors import BrokerUnavailableError
from streaming.options import ClientConfig
from tests.broker_api.conftest import FAST_ENV
from tests.conftest import BrokerProcess, _free_port

ROOT = Path(__file__).resolve().parents[2]


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, cert.pem, key.pem): a CA and a server certificate for 127.0.0.1 / localhost it signed."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sparkmq test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(san, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class HttpsBroker(BrokerProcess):
    """A broker subprocess serving HTTPS; readiness is polled over TLS with the test CA."""

    def __init__(self, ca: Path, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.url = self.url.replace("http://", "https://")
        self.ca = ca

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1.0, verify=trust(str(self.ca))).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker not ready after {timeout_s}s:\n{self.log_tail()}")


def test_broker_and_namesrv_over_https(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    ns_port = _free_port()
    ns_log = open(tmp_path / "namesrv.log", "wb")
    namesrv = subprocess.Popen([sys.executable, "-m", "broker_api", "namesrv", "--port", str(ns_port),
                                "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)],
                               cwd=ROOT, env=clean, stdout=ns_log, stderr=subprocess.STDOUT)
    env = {**clean, **FAST_ENV, "SPARKMQ_TLS__CERTFILE": str(cert), "SPARKMQ_TLS__KEYFILE": str(key),
           "SPARKMQ_TLS__CA_FILE": str(ca), "SPARKMQ_BROKER__NAMESRV_ADDR": f"https://127.0.0.1:{ns_port}"}
    broker = HttpsBroker(ca, tmp_path / "data", _free_port(), env, tmp_path / "broker.log")
    try:
        broker.start()
        with SparkMQClient(broker.url, ca_file=str(ca)) as client:
            sent = client.produce("secure", ["over tls"])
            assert client.pull("secure", sent[0].queue_id, 0).messages[0]["body"] == "over tls"
        with SparkMQClient(broker.url) as untrusting, pytest.raises(BrokerUnreachableError, match="CERTIFICATE"):
            untrusting.queues("secure")
        # the Spark source's client: trusts the CA when given one, refuses the certificate without it
        spark_trusting = ClientConfig(endpoints=(broker.url,), timeout_s=10, trust=Trust(ca_file=str(ca)))
        with StreamingClient(spark_trusting) as sc:
            assert sc.queues("secure")[sent[0].queue_id].max_offset >= 1
        with StreamingClient(ClientConfig(endpoints=(broker.url,), timeout_s=10, retries=1)) as sc, \
                pytest.raises(BrokerUnavailableError, match="CERTIFICATE"):
            sc.queues("secure")
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
            httpx.get(broker.url.replace("https://", "http://") + "/healthz", timeout=5)
        deadline = time.monotonic() + 20
        routed: list[str] = []
        while time.monotonic() < deadline and not routed:  # the broker registered over https with the CA
            try:
                with SparkMQClient(namesrv=f"https://127.0.0.1:{ns_port}", ca_file=str(ca)) as c:
                    routed = [r.broker for r in c.produce("secure", ["routed"])]
            except Exception:  # noqa: BLE001 - not registered yet
                time.sleep(0.2)
        assert routed == ["broker-a"]
        cli = subprocess.run([sys.executable, "-m", "broker_api", "--ca-file", str(ca), "topic", "list",
                              "--url", broker.url], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0 and "secure" in cli.stdout, cli.stderr
        refused = subprocess.run([sys.executable, "-m", "broker_api", "topic", "list", "--url", broker.url],
                                 cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "--ca-file" in refused.stderr
    finally:
        broker.stop()
        namesrv.terminate()
        namesrv.wait(15)
        ns_log.close()


def test_listening_beyond_loopback_without_auth_warns(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMQ_")}
    proc = subprocess.Popen([sys.executable, "-m", "broker_api", "namesrv", "--host", "0.0.0.0", "--port", "0"],
                            cwd=ROOT, env=clean, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for _ in range(50):  # bounded: the warning comes before the ready line
            line = proc.stdout.readline()
            lines.append(line)
            if "ready on" in line or not line:
                break
        text = "".join(lines)
        assert "warning: the NameServer listens on 0.0.0.0 without authentication" in text, text
    finally:
        proc.terminate()
        proc.wait(15)
