"""A real Kubernetes control plane for tests: etcd + kube-apiserver on loopback, plus kubectl and helm.

No kubelet, controller-manager or scheduler run: objects are stored, validated, watched and
authorized for real, but no pod ever starts (a test that needs a running pod writes its status,
playing the kubelet, and says so), namespaces are not finalized and owner references are not
garbage-collected.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import urllib3

from sluice.testing import processes

ROOT = Path(__file__).resolve().parents[3]
"""The source checkout (the cluster and node tiers build their binaries with its scripts)."""
SCRIPTS = ROOT / "tests" / "cluster"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message says what to do."""


def kube_version() -> str:
    """The Kubernetes version the tiers build and run (the wrapper module's `k8s.io/kubernetes`
    requirement, tests/cluster/go.mod): what `helm template` is told the cluster is
    (`--kube-version`; the chart requires 1.29 or newer)."""
    found = re.search(r"^\s*k8s\.io/kubernetes (v[0-9.]+)$", (SCRIPTS / "go.mod").read_text(), re.MULTILINE)
    if found is None:
        raise ControlPlaneError("tests/cluster/go.mod no longer requires k8s.io/kubernetes; keep it there.")
    return found.group(1)


class Binaries(NamedTuple):
    """Where `build-binaries.sh` put each tool's directory."""

    kube: Path
    helm: Path
    prometheus: Path
    kstatus: Path
    coredns: Path | None = None
    netpol: Path | None = None
    """The node's NetworkPolicy enforcer (kube-network-policies)."""


def build_binaries(node: bool = False) -> Binaries:
    """Build or reuse the binaries (with `node`, also the node's, CoreDNS and the NetworkPolicy enforcer)."""
    script = SCRIPTS / "build-binaries.sh"
    if not script.exists():
        raise ControlPlaneError(f"{script} is missing: the test clusters run from a source checkout of Sluice.")
    try:
        proc = subprocess.run(
            [str(script), *(["--node"] if node else [])], capture_output=True, text=True, timeout=1800
        )
    except subprocess.TimeoutExpired:
        raise ControlPlaneError(
            "Building kube-apiserver, etcd and helm took over 30 minutes; check the Go module proxy "
            "and run 'make cluster-bins' on its own to see its progress."
        ) from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ControlPlaneError(last)
    dirs = [Path(line) for line in proc.stdout.strip().splitlines()[-(6 if node else 4):]]
    return Binaries(*dirs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


MARKERS = ("etcd", "kube-apiserver")


def reap_leftovers() -> list[int]:
    """Kill etcd/kube-apiserver processes that a killed earlier run left behind."""
    return processes.reap_leftovers(MARKERS)


@dataclass
class ControlPlane:
    """etcd + kube-apiserver started in `workdir`; `kubeconfig` holds an admin (system:masters) token."""

    kube_bin: Path
    helm_bin: Path
    workdir: Path
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    address: str = "127.0.0.1"
    """Where kube-apiserver listens and what it advertises (the node tier: the node's own IP, so
    pods reach it through the `kubernetes` Service)."""
    extra_args: list[str] = field(default_factory=list)
    owner: int | None = None
    """The pid whose death makes these processes leftovers (default: this process)."""
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    sa_key: Path | None = None
    """The service-account signing key (the controller-manager signs with it too)."""
    data: Path | None = None
    """This start's data directory (etcd, certificates, logs)."""
    _commands: dict[str, list[str]] = field(default_factory=dict)
    _http: urllib3.PoolManager | None = None

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    # ------------------------------------------------------------------ lifecycle

    def start(self, attempts: int = 3) -> ControlPlane:
        reap_leftovers()
        error = ""
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(attempt)
                return self
            except ControlPlaneError as failure:
                error = str(failure)
                self.stop()
        raise ControlPlaneError(f"The test control plane did not start after {attempts} tries: {error}")

    def _spawn(self, name: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        proc = processes.spawn(name, args, log, owner=self.owner)
        self.procs.append((name, proc))
        self._commands[name] = args
        return proc

    def restart_apiserver(self, down: float = 0.0, timeout: float = 90) -> None:
        """Kill kube-apiserver (SIGKILL), leave it down `down` seconds, start it again on the same
        port, certificates and etcd (the chaos tier's apiserver restart)."""
        assert self.data is not None
        index, (_, proc) = next((i, p) for i, p in enumerate(self.procs) if p[0] == "kube-apiserver")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        processes.stop("kube-apiserver", proc)
        self.procs.pop(index)
        time.sleep(down)
        log = self.data / f"apiserver-restart-{time.monotonic_ns()}.log"
        again = self._spawn("kube-apiserver", self._commands["kube-apiserver"], log)
        self._wait(f"{self.server}/readyz", again, log, "kube-apiserver", timeout=timeout)

    def _start_once(self, attempt: int) -> None:
        data = self.workdir / f"try{attempt}"
        data.mkdir(parents=True, exist_ok=True)
        self.data = data
        client, peer, self.port = free_port(), free_port(), free_port()
        etcd = self._spawn(
            "etcd",
            [
                str(self.kube_bin / "etcd"), "--name", "sluice-test", "--data-dir", str(data / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"sluice-test=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync", "--log-level", "warn",
            ],
            data / "etcd.log",
        )
        self._wait(f"http://127.0.0.1:{client}/health", etcd, data / "etcd.log", "etcd", timeout=30)

        sa_key = data / "sa.key"
        _write_rsa_key(sa_key)
        self.sa_key = sa_key
        tokens = data / "tokens.csv"
        tokens.write_text(f'{self.token},sluice-admin,sluice-admin,"system:masters"\n')
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.kube_bin / "kube-apiserver"),
                "--etcd-servers", f"http://127.0.0.1:{client}",
                "--bind-address", self.address, "--advertise-address", self.address,
                "--secure-port", str(self.port), "--cert-dir", str(data / "certs"),
                "--token-auth-file", str(tokens), "--authorization-mode", "RBAC",
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-account-key-file", str(sa_key),
                "--service-account-signing-key-file", str(sa_key),
                "--service-cluster-ip-range", "10.96.0.0/16",
                "--allow-privileged=true", "--enable-priority-and-fairness=false",
                "--profiling=false", "--v=0", *self.extra_args,
            ],
            data / "apiserver.log",
        )
        self._wait(f"{self.server}/readyz", apiserver, data / "apiserver.log", "kube-apiserver", timeout=90)
        self._write_kubeconfig()

    def _wait(self, url: str, proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise ControlPlaneError(f"{what} exited with code {proc.returncode}: {' / '.join(tail)}")
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} was not ready within {timeout:.0f} s (log: {log})")

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sluice-test", "cluster": {"server": self.server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "sluice-test", "context": {"cluster": "sluice-test", "user": "admin"}}],
            "current-context": "sluice-test",
        }
        self.kubeconfig.write_text(json.dumps(config))

    def stop(self) -> None:
        for name, proc in reversed(self.procs):
            processes.stop(name, proc)
        self.procs.clear()

    # ------------------------------------------------------------------ tools

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, user: str | None = None,
                groups: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this apiserver (optionally impersonating a user)."""
        command = [str(self.kube_bin / "kubectl"), "--kubeconfig", str(self.kubeconfig)]
        if user:
            command += ["--as", user, *[f"--as-group={g}" for g in groups]]
        proc = subprocess.run([*command, *args], input=input, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object as `kubectl get KIND NAME -o json` gives it, None where kubectl would fail (not
        found, the apiserver down); with managedFields, which kubectl hides. Read over a kept-alive
        HTTPS connection, not a kubectl process: each of those costs about 0.1 s of CPU here, and
        the tests poll every 0.2 s, which took half a core from the parts under test on 2 cores."""
        group, plural, namespaced = self._resource(kind)
        scope = f"/namespaces/{namespace or 'default'}" if namespaced else ""
        return self._read(f"/{group}{scope}/{plural}/{name}")

    def list(self, kind: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]] | None:
        """The `items` of `kubectl get KIND -n NAMESPACE [-l SELECTOR] -o json` (None where kubectl
        would fail), over the same kept-alive connection as `get`."""
        group, plural, _ = self._resource(kind)
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        body = self._read(f"/{group}/namespaces/{namespace}/{plural}{query}")
        return None if body is None else list(body.get("items") or [])

    def _read(self, path: str) -> dict[str, Any] | None:
        try:
            status, body = self.call("GET", path)
        except urllib3.exceptions.HTTPError:
            return None
        return body if status == 200 else None

    @staticmethod
    def _resource(kind: str) -> tuple[str, str, bool]:
        if kind not in _RESOURCES:
            raise ValueError(f"ControlPlane.get reads {', '.join(sorted(_RESOURCES))}, not {kind!r}: add it to _RESOURCES.")
        return _RESOURCES[kind]

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
        """One request to the apiserver as admin over a kept-alive connection: (status, JSON body).
        Raises urllib3's HTTPError when it cannot be reached."""
        with warnings.catch_warnings():  # the test apiserver's certificate is its own (kubeconfig: insecure too)
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            response = self._pool().request(method, f"{self.server}{path}", body=body, timeout=10.0, retries=False,
                                            headers={"Authorization": f"Bearer {self.token}",
                                                     "Content-Type": "application/json"})
        return response.status, (json.loads(response.data) if response.data else {})

    def _pool(self) -> urllib3.PoolManager:
        if self._http is None:
            self._http = urllib3.PoolManager(maxsize=4, cert_reqs="CERT_NONE", assert_hostname=False)
        return self._http

    def helm(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELM_CACHE_HOME": str(self.workdir / "helm"), "HELM_CONFIG_HOME": str(self.workdir / "helm"),
               "HELM_DATA_HOME": str(self.workdir / "helm"), "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run([str(self.helm_bin / "helm"), *args], capture_output=True, text=True, timeout=timeout, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {proc.stdout.strip()} {proc.stderr.strip()}")
        return proc

    def api_client(self, user: str | None = None, group: str | None = None):  # type: ignore[no-untyped-def]
        """A kubernetes ApiClient as admin, or impersonating `user` (and one `group`) for RBAC tests."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.server
        configuration.verify_ssl = False
        configuration.api_key = {"authorization": f"Bearer {self.token}"}
        api = client.ApiClient(configuration)
        if user:
            api.set_default_header("Impersonate-User", user)
            if group:
                api.set_default_header("Impersonate-Group", group)
        return api


_RESOURCES: dict[str, tuple[str, str, bool]] = {
    kind: (group, plural, namespaced)
    for names, group, plural, namespaced in (
        (("sp", "streamingpool", "streamingpools"), "apis/sluice.dev/v1alpha1", "streamingpools", False),
        (("sq", "streamingquery", "streamingqueries"), "apis/sluice.dev/v1alpha1", "streamingqueries", True),
        (("secret", "secrets"), "api/v1", "secrets", True),
        (("cm", "configmap", "configmaps"), "api/v1", "configmaps", True),
        (("svc", "service", "services"), "api/v1", "services", True),
        (("pod", "pods"), "api/v1", "pods", True),
        (("ns", "namespace", "namespaces"), "api/v1", "namespaces", False),
        (("deploy", "deployment", "deployments"), "apis/apps/v1", "deployments", True),
        (("clusterkopfpeering", "clusterkopfpeerings"), "apis/kopf.dev/v1", "clusterkopfpeerings", False),
    )
    for kind in names
}
"""What `ControlPlane.get` reads: kubectl's names for a kind, to its API path and scope."""


def _write_rsa_key(path: Path) -> None:
    """The service-account signing key kube-apiserver requires (never used to sign anything here)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
