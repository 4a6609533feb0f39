"""images/*.Dockerfile (for users with Docker) and images/build-local.sh (no Docker, no registry)
must describe the same images: same base, Debian packages, user, working directory, environment,
entrypoint and command. Checked against the images the node tier actually built and runs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from sluice.testing.node import NodeCluster

pytestmark = [pytest.mark.node]
ROOT = Path(__file__).resolve().parents[2]


def dockerfile(name: str) -> dict[str, object]:
    """The final stage of images/<name>.Dockerfile: its packages and image config."""
    text = (ROOT / "images" / f"{name}.Dockerfile").read_text().replace("\\\n", " ")
    final = text[text.rindex("\nFROM "):]
    config: dict[str, object] = {"Env": []}
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            config["From"] = rest.split()[0]
        elif word == "USER":
            config["User"] = rest
        elif word == "WORKDIR":
            config["WorkingDir"] = rest
        elif word == "ENV":
            config["Env"] = [*config["Env"], *shlex.split(rest)]  # type: ignore[misc]
        elif word in ("ENTRYPOINT", "CMD"):
            config["Entrypoint" if word == "ENTRYPOINT" else "Cmd"] = json.loads(rest)
        elif word == "RUN" and "apt-get install" in rest:
            install = rest.split("apt-get install", 1)[1].split("&&")[0]
            config["Packages"] = sorted(w for w in install.split() if not w.startswith("-"))
    return config


def built(node: NodeCluster, name: str) -> dict[str, object]:
    tarball, _ = node.images[name]
    proc = subprocess.run(["skopeo", "inspect", "--config", f"docker-archive:{tarball}"], capture_output=True,
                          text=True, check=True)
    config = json.loads(proc.stdout)["config"]
    script = (ROOT / "images" / "build-local.sh").read_text()
    packages = re.search(rf'base {name} ([^ ]+) ', script)
    assert packages, f"build-local.sh builds no {name} base"
    config["Packages"] = sorted(packages.group(1).split(","))
    return dict(config)


@pytest.mark.parametrize("name", ["operator", "runtime"])
def test_the_dockerfile_and_the_local_build_describe_one_image(node: NodeCluster, name: str) -> None:
    wanted, have = dockerfile(name), built(node, name)
    assert wanted["From"] == "debian:bookworm-slim" and "bookworm" in (ROOT / "images" / "build-local.sh").read_text()
    # python3-pip is how a Dockerfile installs; build-local.sh installs with the host's pip instead
    assert [p for p in wanted["Packages"] if p != "python3-pip"] == have["Packages"]  # type: ignore[union-attr]
    for key in ("User", "WorkingDir", "Entrypoint"):
        assert wanted[key] == have[key], key
    assert wanted.get("Cmd") == have.get("Cmd")
    assert sorted(wanted["Env"]) == sorted(have["Env"])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["operator", "runtime"])
def test_the_images_ship_no_benchmark_code_and_no_test_kit(node: NodeCluster, name: str) -> None:
    """The product's images hold Sluice's runtime (or operator) but not `sluice.bench` (the
    benchmark lab) nor `sluice.testing` (the real-parts kit): every file of every layer is read."""
    import tarfile

    tarball, _ = node.images[name]
    files: list[str] = []
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        for layer in manifest[0]["Layers"]:
            blob, size = archive.extractfile(layer), archive.getmember(layer).size
            assert blob is not None
            try:
                with tarfile.open(fileobj=blob, mode="r|") as entries:
                    for entry in entries:
                        files.append(entry.name)
            except tarfile.ReadError:
                # the layers umoci writes end without tar's two zero blocks (containerd does not
                # need them): only that is tolerated, once the whole layer was read
                assert blob.tell() == size, f"layer {layer} of the {name} image is unreadable"
    sluice = [f for f in files if "/dist-packages/sluice/" in f]
    assert any(f.endswith("/sluice/scheduler/core.py") for f in sluice), "Sluice itself is missing from the image"
    if name == "runtime":
        assert any(f.endswith("/sluice/runtime/host.py") for f in sluice)
    shipped = sorted(f for f in sluice if "/sluice/bench/" in f or "/sluice/testing/" in f)
    assert shipped == [], f"{name} image ships {shipped[:5]}"
