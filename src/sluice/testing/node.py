"""A real single-node Kubernetes on this machine, for the node test tier and `sluice dev cluster`.

The control plane of `controlplane.py` (etcd, kube-apiserver) on the node's own address, plus
kube-controller-manager, kube-scheduler, containerd + runc, kubelet, kube-proxy (iptables mode),
CoreDNS and a NetworkPolicy enforcer (kube-network-policies), all built from the Go module proxy or
installed from Debian's packages. Pods get
addresses from a bridge CNI network; Services work through kube-proxy, `kubernetes.default.svc`
included; DNS names resolve through CoreDNS, which runs on the host behind a selectorless
`kube-dns` Service. Images come from `images/build-local.sh` (no registry) and are imported into
containerd before the kubelet starts.

NetworkPolicies are enforced: kube-network-policies' controller judges the first packet of every
new connection from or to a pod by the cluster's NetworkPolicies, read from an nfqueue. Upstream
diverts those packets with nftables' `queue` expression, which this VM's kernel lacks (nft_queue is
not built; the xtables NFQUEUE target is), so the node puts them in the queue with one iptables
chain of its own (`NETPOL_CHAIN`, at the mangle table's POSTROUTING: after Services' DNAT, before
masquerading, as upstream's chain); the controller's own nftables sync then fails and says so in
its log, harmlessly. The node's root-owned traffic (the kubelet's probes, the tests' requests from
the host) passes unjudged, as upstream does.

What this machine taught (docs/development.md): runc cannot write oom_score_adj here, so
containerd runs with `restrict_oom_score_adj` and kube-proxy with `--oom-score-adj 0`; kubelet
1.34 must be told that cgroup v1 is allowed; the apiserver reaches the kubelet by the node's IP.

Teardown undoes what start did on the host: pods deleted, processes stopped (containerd's shims
too), mounts under the state directory, the `cni0` bridge, kube-proxy's and the enforcer's iptables chains.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import processes
from .controlplane import ROOT, ControlPlane, ControlPlaneError, build_binaries

POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
DNS_SERVICE_IP = "10.96.0.10"
DNS_PORT = 1053
NODE_NAME = "sluice-node"
BRIDGE = "cni0"
NICE_LIMIT = 25
"""RLIMIT_NICE the node's containerd runs with, and so every container: a thread without
CAP_SYS_NICE may then go down to nice -5 (20 - 25), which the urgent lane's threads take
(`sluice.runtime.priority`). A node setting, as `LimitNICE=25` in containerd's systemd unit would
be; `sluice dev cluster up --nice-limit 0` starts a node without it."""
NETPOL_QUEUE = 100
"""The nfqueue the enforcer reads (kube-network-policies' default)."""
NETPOL_CHAIN = "SLUICE-NETPOL"
"""The node's iptables chain (mangle table) that puts new pod connections in `NETPOL_QUEUE`."""
MARKERS = ("containerd", "kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler", "coredns",
           "kube-network-policies")
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1",
           "net/bridge/bridge-nf-call-ip6tables": "1"}


class NodeError(ControlPlaneError):
    """The node could not be had; the message is one sentence naming what is missing."""


def node_ip() -> str:
    """The address of the interface holding the default route (the node's InternalIP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.254", 9))  # no packet is sent: this only picks the route
        except OSError:
            raise NodeError("This machine has no default route, so the node has no address pods can reach; "
                            "bring up a network interface with one.") from None
        address = str(sock.getsockname()[0])
    if address.startswith("127."):
        raise NodeError("The default route leads to loopback; the node needs an address pods can reach.")
    return address


def check_host() -> None:
    """One sentence naming what this machine lacks for a node, or nothing."""
    if os.geteuid() != 0:
        raise NodeError("The node tier needs root (containerd, runc, iptables and mounts); run 'make test' as root.")
    needed = {"containerd": "containerd", "runc": "runc", "ctr": "containerd", "iptables": "iptables",
              "conntrack": "conntrack", "umoci": "umoci", "skopeo": "skopeo", "debootstrap": "debootstrap"}
    missing = sorted({package for tool, package in needed.items() if shutil.which(tool) is None})
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("containernetworking-plugins")
    if missing:
        raise NodeError(f"The node tier needs {', '.join(missing)}; run tests/node/host-packages.sh as root to install them.")
    cgroups = Path("/sys/fs/cgroup")
    if not (cgroups / "memory").is_dir() and not (cgroups / "cgroup.controllers").exists():
        raise NodeError("No cgroup filesystem is mounted at /sys/fs/cgroup; the kubelet needs cgroups (v1 or v2).")
    if not Path("/proc/sys/net/bridge").exists():
        with contextlib.suppress(FileNotFoundError, subprocess.SubprocessError):
            subprocess.run(["modprobe", "br_netfilter"], capture_output=True, timeout=30)
        if not Path("/proc/sys/net/bridge").exists():
            raise NodeError("The kernel's br_netfilter is missing (no /proc/sys/net/bridge); Services need it: modprobe br_netfilter.")


def build_images() -> dict[str, tuple[Path, str]]:
    """Build or reuse the three images; returns {name: (docker-archive tarball, tag)}."""
    script = ROOT / "images" / "build-local.sh"
    python = os.environ.get("SLUICE_IMAGE_PYTHON") or _venv_python()
    try:
        proc = subprocess.run([str(script)], capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "PYTHON": python})
    except subprocess.TimeoutExpired:
        raise NodeError("Building the images took over 30 minutes; run images/build-local.sh alone to see its progress.") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NodeError(f"Building the images failed: {last}")
    images = {}
    for line in proc.stdout.strip().splitlines():
        name, tarball, tag = line.split()
        images[name] = (Path(tarball), tag)
    return images


def _venv_python() -> str:
    import sys

    return sys.executable


@dataclass
class NodeCluster:
    """A one-node Kubernetes rooted at `workdir`; `kubeconfig` is an admin's."""

    workdir: Path
    owner: int | None = None
    plane: ControlPlane | None = None
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    ip: str = ""
    images: dict[str, tuple[Path, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    say: Callable[[str], None] = field(default=lambda message: None, repr=False)
    """Progress, one line a step (`sluice dev cluster up` prints it)."""
    nice_limit: int = NICE_LIMIT
    """RLIMIT_NICE of containerd and so of every container (0: the kernel's default, none)."""

    def __post_init__(self) -> None:
        # absolute: the kubelet reads containerd's socket from a unix:// URL, where a relative
        # path loses its first part (bench/... became /results/...)
        self.workdir = self.workdir.absolute()

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    @property
    def state(self) -> Path:
        return self.workdir / "node"

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = processes.spawn(name, args, self.state / f"{name}.log", env=env, owner=self.owner)
        self.procs.append((name, proc))
        return proc

    # ------------------------------------------------------------------ start

    def start(self) -> NodeCluster:
        check_host()
        reap_leftovers()
        running = active_record()
        if running is not None:
            raise NodeError(f"A node cluster of process {running['owner']} is running (state {running['state']}); "
                            "stop it first (for a dev cluster: sluice dev cluster down).")
        started = time.monotonic()
        self.say("building (or reusing) kube-apiserver, etcd, kubelet, CoreDNS ...")
        kube, helm, _prometheus, _kstatus, coredns, netpol = build_binaries(node=True)
        assert coredns is not None and netpol is not None  # built with node=True
        self.timings["binaries_s"] = time.monotonic() - started
        mark = time.monotonic()
        self.say(f"binaries ready in {self.timings['binaries_s']:.0f} s; building (or reusing) the images ...")
        self.images = build_images()
        self.timings["images_s"] = time.monotonic() - mark
        mark = time.monotonic()
        self.ip = node_ip()
        if self.state.exists():
            _unmount_under(self.state)
            shutil.rmtree(self.state, ignore_errors=True)
        self.state.mkdir(parents=True)
        self.nice_limit = self._nice_limit()
        try:
            self._host_network()
            RECORD.parent.mkdir(parents=True, exist_ok=True)
            RECORD.write_text(json.dumps({"owner": self.owner or os.getpid(), "state": str(self.state),
                                          "sysctls": self._saved_sysctls, "workdir": str(self.workdir),
                                          "kubectl": str(kube / "kubectl"), "helm": str(helm / "helm"),
                                          "kubeconfig": str(self.workdir / "controlplane" / "kubeconfig"),
                                          "nice_limit": self.nice_limit}))
            self.plane = ControlPlane(kube, helm, self.workdir / "controlplane", address=self.ip, owner=self.owner,
                                      extra_args=["--kubelet-preferred-address-types", "InternalIP,Hostname",
                                                  "--service-node-port-range", "30000-32767"])
            self.say(f"images ready in {self.timings['images_s']:.0f} s; starting the control plane ...")
            self.plane.start()
            self._controllers(kube)
            self.say("starting containerd and importing the images ...")
            self._containerd()
            self._import_images()
            self.say("starting the kubelet, kube-proxy and CoreDNS; waiting for the node to be Ready ...")
            self._kubelet(kube)
            self._kube_proxy(kube)
            self._network_policies(netpol)
            self._dns(coredns)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.timings["up_s"] = time.monotonic() - mark
        return self

    def _host_network(self) -> None:
        self._saved_sysctls = {}
        for key, value in SYSCTLS.items():
            path = Path("/proc/sys") / key
            self._saved_sysctls[key] = path.read_text().strip()
            path.write_text(value)
        net = self.state / "cni" / "net.d"
        net.mkdir(parents=True)
        (net / "10-sluice.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "sluice",
            "plugins": [
                {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}],
                          "dataDir": str(self.state / "cni" / "ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }, indent=2))

    def _controllers(self, kube: Path) -> None:
        assert self.plane is not None and self.plane.sa_key is not None and self.plane.data is not None
        config = str(self.kubeconfig)
        self._spawn("kube-controller-manager", [
            str(kube / "kube-controller-manager"), "--kubeconfig", config, "--authentication-kubeconfig", config,
            "--authorization-kubeconfig", config, "--service-account-private-key-file", str(self.plane.sa_key),
            "--root-ca-file", str(self.plane.data / "certs" / "apiserver.crt"),
            "--cluster-signing-duration", "24h", "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", "0", "--controllers", "*,-nodeipam,-cloud-node-lifecycle,-service,-route",
            "--node-monitor-grace-period", "40s", "--v=0",
        ])
        self._spawn("kube-scheduler", [
            str(kube / "kube-scheduler"), "--kubeconfig", config, "--authentication-kubeconfig", config,
            "--authorization-kubeconfig", config, "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", "0", "--v=0",
        ])

    @property
    def containerd_socket(self) -> Path:
        return self.state / "containerd" / "containerd.sock"

    def _nice_limit(self) -> int:
        """The RLIMIT_NICE containerd can be given here: the one asked, or 0 (said) where the host's
        hard limit is lower and this process may not raise it (no CAP_SYS_RESOURCE, as in some VMs)."""
        asked = self.nice_limit
        if asked and subprocess.run(["prlimit", f"--nice={asked}:{asked}", "--", "true"],
                                    capture_output=True, check=False).returncode != 0:
            hard = resource.getrlimit(resource.RLIMIT_NICE)[1]
            self.say(f"containerd runs without RLIMIT_NICE {asked}: this host's hard limit is {hard} and raising it "
                     "needs CAP_SYS_RESOURCE, which this process lacks (pods' threads then cannot rise)")
            return 0
        return asked

    def _containerd(self) -> None:
        root = self.state / "containerd"
        root.mkdir(parents=True, exist_ok=True)
        pause = self.images["pause"][1]
        config = root / "config.toml"
        config.write_text(f'''version = 2
root = "{root / 'root'}"
state = "{root / 'state'}"
[grpc]
  address = "{self.containerd_socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # runc cannot write /proc/self/oom_score_adj in this VM (no CAP_SYS_RESOURCE)
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{self.state / 'cni' / 'net.d'}"
''')
        limit = ["prlimit", f"--nice={self.nice_limit}:{self.nice_limit}", "--"] if self.nice_limit else []
        proc = self._spawn("containerd", [*limit, "containerd", "--config", str(config)])
        self._until(lambda: self.containerd_socket.exists() and self._ctr("version", check=False).returncode == 0,
                    proc, "containerd", 30)

    def _ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args],
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise NodeError(f"ctr {' '.join(args[:2])} failed: {proc.stderr.strip()[:300]}")
        return proc

    def _import_images(self) -> None:
        for _name, (tarball, _tag) in self.images.items():
            self._ctr("images", "import", str(tarball))

    def _kubelet(self, kube: Path) -> None:
        root = self.state / "kubelet"
        root.mkdir(parents=True)
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,  # this VM mounts cgroup v1; kubelet 1.34 refuses it unless told
            "failSwapOn": False,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": "cluster.local",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "podLogsDir": str(self.state / "pod-logs"),
            "resolvConf": "/etc/resolv.conf",
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
            "readOnlyPort": 0, "healthzPort": 0, "port": 10250,
            "syncFrequency": "10s", "fileCheckFrequency": "10s",
        }))
        self._spawn("kubelet", [
            str(kube / "kubelet"), "--config", str(config), "--kubeconfig", str(self.kubeconfig),
            "--root-dir", str(root), "--node-ip", self.ip, "--hostname-override", NODE_NAME,
            "--cert-dir", str(root / "pki"), "--v=0",
        ])

    def _kube_proxy(self, kube: Path) -> None:
        self._spawn("kube-proxy", [
            str(kube / "kube-proxy"), "--kubeconfig", str(self.kubeconfig), "--proxy-mode", "iptables",
            "--cluster-cidr", POD_CIDR, "--hostname-override", NODE_NAME,
            "--oom-score-adj", "0",  # as for runc: the VM refuses oom_score_adj writes
            "--conntrack-max-per-core", "0", "--healthz-bind-address", "127.0.0.1:10256",
            "--metrics-bind-address", "127.0.0.1:10249", "--v=0",
        ])

    def _network_policies(self, netpol: Path) -> None:
        """The enforcer, then the chain that feeds it (fail closed: a queued packet that nobody
        reads is dropped, as upstream's default)."""
        self._spawn("kube-network-policies", [
            str(netpol / "kube-network-policies"), "--kubeconfig", str(self.kubeconfig),
            "--hostname-override", NODE_NAME, "--nfqueue-id", str(NETPOL_QUEUE), "--v=0",
        ])
        rules = [["-N", NETPOL_CHAIN],
                 ["-A", NETPOL_CHAIN, "-m", "owner", "--uid-owner", "0", "-j", "RETURN"],
                 ["-A", NETPOL_CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"],
                 ["-A", NETPOL_CHAIN, "-s", POD_CIDR, "-j", "NFQUEUE", "--queue-num", str(NETPOL_QUEUE)],
                 ["-A", NETPOL_CHAIN, "-d", POD_CIDR, "-j", "NFQUEUE", "--queue-num", str(NETPOL_QUEUE)],
                 ["-A", "POSTROUTING", "-j", NETPOL_CHAIN]]
        for rule in rules:
            proc = subprocess.run(["iptables", "-t", "mangle", *rule], capture_output=True, text=True)
            if proc.returncode != 0:
                raise NodeError(f"Could not divert pod connections to the NetworkPolicy enforcer (iptables {' '.join(rule)}: "
                                f"{proc.stderr.strip()}); the kernel needs the NFQUEUE target (nfnetlink_queue) "
                                "and the owner and conntrack matches.")

    def _dns(self, coredns: Path) -> None:
        corefile = self.state / "Corefile"
        corefile.write_text(f""".:{DNS_PORT} {{
    bind {self.ip}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig} sluice-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 10
    loop
}}
""")
        self._spawn("coredns", [str(coredns / "coredns"), "-conf", str(corefile)])
        manifests = [
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
             "spec": {"clusterIP": DNS_SERVICE_IP, "ports": [
                 {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": DNS_PORT},
                 {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": DNS_PORT}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "kube-dns-host", "namespace": "kube-system",
                          "labels": {"kubernetes.io/service-name": "kube-dns",
                                     "endpointslice.kubernetes.io/managed-by": "sluice.dev-node-tier"}},
             "addressType": "IPv4", "endpoints": [{"addresses": [self.ip], "conditions": {"ready": True}}],
             "ports": [{"name": "dns", "port": DNS_PORT, "protocol": "UDP"},
                       {"name": "dns-tcp", "port": DNS_PORT, "protocol": "TCP"}]},
        ]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise NodeError(f"{name} exited with code {proc.returncode}: {_tail(self.state / f'{name}.log')}")
            ready = self.kubectl("get", "node", NODE_NAME, "-o",
                                 "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
            account = self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False)
            if ready.stdout.strip() == "True" and account.returncode == 0:
                return
            time.sleep(0.5)
        raise NodeError(f"The node did not become Ready within 120 s (kubelet: {_tail(self.state / 'kubelet.log')})")

    def _until(self, check: object, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise NodeError(f"{what} exited with code {proc.returncode}: {_tail(self.state / f'{what}.log')}")
            if callable(check) and check():
                return
            time.sleep(0.2)
        raise NodeError(f"{what} did not start within {timeout:.0f} s: {_tail(self.state / f'{what}.log')}")

    # ------------------------------------------------------------------ tools

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        assert self.plane is not None
        command = [str(self.plane.kube_bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.plane is not None
        return self.plane.helm(*args, check=False, timeout=400)

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        """Delete every pod, stop every process, undo the host changes (safe to call twice)."""
        names = dict(self.procs)
        if self.plane is not None and "kubelet" in names and names["kubelet"].poll() is None:
            self._save_logs()
            with contextlib.suppress(Exception):
                self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=5", "--wait=true",
                             "--timeout=60s", check=False, timeout=90)
        for name, proc in reversed(self.procs):
            if name != "containerd":
                processes.stop(name, proc)
        if "containerd" in names and names["containerd"].poll() is None:
            self._kill_tasks()
            processes.stop("containerd", names["containerd"])
        self.procs.clear()
        kill_shims(self.state)
        if self.plane is not None:
            self.plane.stop()
        self._undo_host()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(RECORD.read_text()).get("state") == str(self.state):
                RECORD.unlink()

    def _save_logs(self) -> None:
        """Every container's log into `workdir/logs` before the pods go (kubelet deletes them)."""
        source = self.state / "pod-logs"
        target = self.workdir / "logs"
        with contextlib.suppress(OSError):
            for log in source.glob("*/*/*.log"):
                pod = log.parent.parent.name.rsplit("_", 1)[0]
                destination = target / f"{pod}_{log.parent.name}_{log.name}"
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, destination)

    def _kill_tasks(self) -> None:
        with contextlib.suppress(Exception):
            tasks = self._ctr("tasks", "list", "-q", check=False, timeout=30).stdout.split()
            for task in tasks:
                self._ctr("tasks", "kill", "-s", "SIGKILL", task, check=False, timeout=30)
            for container in self._ctr("containers", "list", "-q", check=False, timeout=30).stdout.split():
                self._ctr("tasks", "delete", "-f", container, check=False, timeout=30)

    def _undo_host(self) -> None:
        undo_host(self.state, getattr(self, "_saved_sysctls", {}))


def kill_shims(state: Path) -> None:
    """SIGKILL containerd's shims (and so their containers) started for `state`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            if "containerd-shim" in cmdline and str(state) in (proc / "environ").read_bytes().decode(errors="replace") + cmdline:
                os.killpg(int(proc.name), signal.SIGKILL)
    # the shims run each pod in its own cgroup under kubepods: kill what is left there
    for cgroup in Path("/sys/fs/cgroup").glob("*/kubepods"):
        for tasks in cgroup.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                for pid in tasks.read_text().split():
                    os.kill(int(pid), signal.SIGKILL)


def undo_host(state: Path, sysctls: dict[str, str]) -> None:
    _unmount_under(state)
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    for tool in ("iptables", "ip6tables"):
        _flush_chains(tool)
    for cgroup in sorted(Path("/sys/fs/cgroup").glob("*/kubepods"), reverse=True):
        for directory in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            cgroup.rmdir()
    for key, value in sysctls.items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)
    with contextlib.suppress(OSError):
        for link in Path("/var/log/containers").glob("*.log"):
            link.unlink()
    # network namespaces containerd pinned for pods the kubelet had no time to tear down
    for netns in Path("/run/netns").glob("cni-*"):
        subprocess.run(["umount", str(netns)], capture_output=True)
        with contextlib.suppress(OSError):
            netns.unlink()


PREFIXES = ("KUBE-", "CNI-", "SLUICE-")


def _flush_chains(tool: str) -> None:
    """Remove kube-proxy's, the CNI plugins' and the node's own chains (KUBE-*, CNI-*, SLUICE-*)
    from every table."""
    if shutil.which(tool) is None:
        return
    for table in ("filter", "nat", "mangle"):
        listing = subprocess.run([tool, "-t", table, "-S"], capture_output=True, text=True).stdout.splitlines()
        ours = [line for line in listing if line.startswith("-A ") and any(prefix in line for prefix in PREFIXES)]
        for rule in ours:
            words = shlex.split(rule)  # comments are quoted: "kubernetes service portals"
            if not words[1].startswith(PREFIXES):  # a jump from a built-in chain into ours
                subprocess.run([tool, "-t", table, "-D", *words[1:]], capture_output=True)
        for line in listing:
            if line.startswith("-N ") and line.split()[1].startswith(PREFIXES):
                subprocess.run([tool, "-t", table, "-F", line.split()[1]], capture_output=True)
        for line in listing:
            if line.startswith("-N ") and line.split()[1].startswith(PREFIXES):
                subprocess.run([tool, "-t", table, "-X", line.split()[1]], capture_output=True)


def _unmount_under(path: Path) -> None:
    """Unmount everything mounted below `path` (deepest first)."""
    prefix = str(path.resolve())
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)


def _tail(log: Path, lines: int = 3) -> str:
    try:
        return " / ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])[-600:]
    except OSError:
        return "no log"


RECORD = processes.RUN_DIR / "node.json"
"""The running node's owner, state directory and the sysctls it changed (for a later run's cleanup)."""


def active_record() -> dict[str, object] | None:
    """The record of a node cluster whose owner still runs, if any."""
    try:
        record = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None
    return record if processes.alive(int(record["owner"])) and int(record["owner"]) != os.getpid() else None


def reap_leftovers() -> list[int]:
    """Undo what a killed earlier run left behind: its processes (node and control plane), its
    containers, mounts, bridge, iptables chains and sysctls."""
    reaped = processes.reap_leftovers((*MARKERS, "etcd", "kube-apiserver"))
    try:
        record = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return reaped
    if processes.alive(int(record["owner"])):
        return reaped
    state = Path(record["state"])
    kill_shims(state)
    undo_host(state, dict(record.get("sysctls") or {}))
    RECORD.unlink(missing_ok=True)
    return reaped


# ---------------------------------------------------------------------- `sluice dev cluster`

DEV_OWNER = 1
"""A dev cluster's processes are stamped with PID 1 as their owner: they outlive the command that
started them, no test run reaps them, and a test run refuses to start beside them."""


def dev_up(workdir: Path, say: Callable[[str], None] = lambda message: None,
           nice_limit: int = NICE_LIMIT) -> NodeCluster:
    """Start a node that keeps running after this process exits; `say` hears each step."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = NodeCluster(workdir, owner=DEV_OWNER, say=say, nice_limit=nice_limit)
    cluster.start()
    return cluster


def dev_record() -> dict[str, str] | None:
    try:
        record = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None
    return record if int(record.get("owner", 0)) == DEV_OWNER else None


def dev_cluster() -> ExternalCluster | None:
    """The running dev cluster, driven with its own kubectl and helm; None if none runs."""
    record = dev_record()
    if record is None or not record.get("helm"):  # a record without helm: started by an older Sluice
        return None
    return ExternalCluster(Path(record["workdir"]), Path(record["kubeconfig"]), node_ip(),
                           kubectl_bin=record["kubectl"], helm_bin=record["helm"],
                           nice_limit=int(record.get("nice_limit", 0)))


def dev_down() -> bool:
    """Stop the dev cluster (pods deleted first, then every process, then the host undone)."""
    record = dev_record()
    if record is None:
        return False
    kubectl, kubeconfig = record.get("kubectl", ""), record.get("kubeconfig", "")
    if kubectl and Path(kubectl).exists():
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run([kubectl, "--kubeconfig", kubeconfig, "delete", "pods", "--all", "--all-namespaces",
                            "--grace-period=5", "--timeout=60s"], capture_output=True, timeout=90)
    recorded = []
    for pidfile in processes.RUN_DIR.glob("*.pid"):
        with contextlib.suppress(ValueError, OSError):
            pid, owner = (int(x) for x in pidfile.read_text().split())
            if owner == DEV_OWNER:
                recorded.append((pidfile, pid))
    # containerd last: the others first, so nothing restarts a container while it goes
    recorded.sort(key=lambda item: item[0].name.startswith("containerd"))
    for pidfile, pid in recorded:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while processes.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        pidfile.unlink(missing_ok=True)
    state = Path(record["state"])
    kill_shims(state)
    undo_host(state, dict(record.get("sysctls") or {}))  # type: ignore[arg-type]
    RECORD.unlink(missing_ok=True)
    return True


@dataclass
class ExternalCluster:
    """A cluster run by someone else (e2e/kind.sh): the node tier's tests against it, with kubectl
    and helm from PATH. Pods reach this host (the Kafka broker) at `ip`; the images must already be
    on the nodes (kind load docker-image)."""

    workdir: Path
    kubeconfig: Path
    ip: str
    timings: dict[str, float] = field(default_factory=dict)
    kubectl_bin: str = "kubectl"
    helm_bin: str = "helm"
    nice_limit: int | None = None
    """Its container runtime's RLIMIT_NICE where known (a dev cluster's record says it)."""

    def start(self) -> ExternalCluster:
        for tool in (self.kubectl_bin, self.helm_bin):
            if shutil.which(tool) is None:
                raise NodeError(f"Running the node tier against {self.kubeconfig} needs {tool} on PATH.")
        return self

    def stop(self) -> None:
        """Nothing to stop: the cluster belongs to whoever started it."""

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.kubectl_bin, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.helm_bin, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True, text=True,
                              timeout=400)
