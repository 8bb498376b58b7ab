#!/usr/bin/env python3
"""Checks deploy/: the Kubernetes manifests parse as YAML and grant tprof exactly the
capabilities it needs (BPF, PERFMON, SYS_PTRACE; everything else dropped, never privileged) and
no seccomp filter in the way of bpf() and perf_event_open();
the sidecar shares the pod's PID namespace and hands libtprof_cupti.so to the trainer through an
emptyDir named by CUDA_INJECTION64_PATH; the node agent runs in the host's PID namespace; the
Dockerfile builds with the repository's installer and ends in tprof.

Usage: check_deploy.py REPO_DIR. Prints one line per failed check and exits 1, or "ok".
"""
import pathlib
import sys

import yaml

TPROF_CAPABILITIES = {"BPF", "PERFMON", "SYS_PTRACE"}
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def load(path):
    documents = list(yaml.safe_load_all(path.read_text()))
    check(len(documents) == 1 and isinstance(documents[0], dict), f"{path}: one YAML mapping expected")
    return documents[0]


def check_tprof_container(container, where):
    context = container.get("securityContext", {})
    capabilities = context.get("capabilities", {})
    check(set(capabilities.get("add", [])) == TPROF_CAPABILITIES,
          f"{where}: capabilities.add must be exactly {sorted(TPROF_CAPABILITIES)}, not {capabilities.get('add')}")
    check(capabilities.get("drop") == ["ALL"], f"{where}: capabilities.drop must be [ALL]")
    check(not context.get("privileged", False), f"{where}: must not be privileged")
    check(context.get("seccompProfile", {}).get("type") == "Unconfined",
          f"{where}: seccompProfile must be Unconfined (a default profile may refuse bpf())")


def check_sidecar(path):
    pod = load(path)
    check(pod.get("kind") == "Pod", f"{path}: kind must be Pod")
    spec = pod.get("spec", {})
    check(spec.get("shareProcessNamespace") is True, f"{path}: shareProcessNamespace must be true")
    containers = {c["name"]: c for c in spec.get("containers", [])}
    check("tprof" in containers, f"{path}: no container named tprof")
    if "tprof" in containers:
        check_tprof_container(containers["tprof"], f"{path} container tprof")
    others = [c for name, c in containers.items() if name != "tprof"]
    check(len(others) == 1, f"{path}: one workload container expected beside tprof")
    empty_dirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    for workload in others:
        env = {e["name"]: e.get("value", "") for e in workload.get("env", [])}
        library = env.get("CUDA_INJECTION64_PATH", "")
        check(library.endswith("/libtprof_cupti.so"), f"{path}: the workload needs CUDA_INJECTION64_PATH=.../libtprof_cupti.so")
        mounts = {m["mountPath"]: m["name"] for m in workload.get("volumeMounts", [])}
        library_dir = library.rsplit("/", 1)[0]
        check(mounts.get(library_dir) in empty_dirs, f"{path}: {library_dir} must be an emptyDir mount in the workload")
        init_mounts = {m["name"] for c in spec.get("initContainers", []) for m in c.get("volumeMounts", [])}
        check(mounts.get(library_dir) in init_mounts, f"{path}: an init container must fill {library_dir}")


def check_node_agent(path):
    daemon_set = load(path)
    check(daemon_set.get("kind") == "DaemonSet", f"{path}: kind must be DaemonSet")
    spec = daemon_set.get("spec", {}).get("template", {}).get("spec", {})
    check(spec.get("hostPID") is True, f"{path}: hostPID must be true")
    containers = spec.get("containers", [])
    check(len(containers) == 1, f"{path}: one container expected")
    for container in containers:
        check_tprof_container(container, f"{path} container {container.get('name')}")


def check_dockerfile(path):
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    check(any(line.startswith("FROM") and "AS build" in line for line in lines), f"{path}: no build stage")
    check(any("scripts/install-deps.sh --build-only" in line for line in lines),
          f"{path}: the build stage must use scripts/install-deps.sh --build-only")
    check(lines and lines[-2:] == ['ENTRYPOINT ["tprof"]', 'CMD ["--help"]'], f"{path}: must end in tprof")


def main():
    deploy = pathlib.Path(sys.argv[1]) / "deploy"
    check_sidecar(deploy / "k8s/sidecar.yaml")
    check_node_agent(deploy / "k8s/node-agent.yaml")
    check_dockerfile(deploy / "Dockerfile")
    for failure in failures:
        print(failure)
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
