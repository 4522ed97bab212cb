"""Every Pod Security Standards check, with the allowed and disallowed values the standard's page
documents, through the whole admission path: the chain model and vgate's engine in process,
`vgate eval`, and the real server over HTTPS must agree on each.

Each case changes one field of a pod the restricted level admits, in namespace ``web`` of the
shipped config (enforce baseline, warn restricted). A disallowed value must fail its check at the
level the standard puts it (baseline: denied; restricted: a warning), and nothing else may fail;
an allowed value must fail nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from helpers import POLICIES, RESTRICTED_SPEC

Pod = dict[str, Any]


def spec_set(**fields: Any) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"].update(fields)


def pod_context(**fields: Any) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"]["securityContext"].update(fields)


def container_context(**fields: Any) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"]["containers"][0]["securityContext"].update(fields)


def container_set(**fields: Any) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"]["containers"][0].update(fields)


def annotate(key: str, value: str) -> Callable[[Pod], None]:
    return lambda pod: pod["metadata"].setdefault("annotations", {}).update({key: value})


def drop_from(context: str, key: str) -> Callable[[Pod], None]:
    def change(pod: Pod) -> None:
        holder = pod["spec"] if context == "pod" else pod["spec"]["containers"][0]
        holder["securityContext"].pop(key)
    return change


def volume(source: str, value: Any) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"].setdefault("volumes", []).append({"name": "v", source: value})


def capabilities(add: list[str] | None = None, drop: list[str] | None = None) -> Callable[[Pod], None]:
    caps = {**({"add": add} if add is not None else {}), **({"drop": drop} if drop is not None else {})}
    return container_context(capabilities=caps)


def probe(host: str) -> Callable[[Pod], None]:
    return container_set(livenessProbe={"httpGet": {"host": host, "path": "/", "port": 8080}})


def sysctl(name: str) -> Callable[[Pod], None]:
    return pod_context(sysctls=[{"name": name, "value": "1"}])


ALLOWED = "allowed"
# (case id, change, rule expected to fail, level it fails at); rule ALLOWED: nothing may fail.
CASES: list[tuple[str, Callable[[Pod], None], str, str | None]] = [
    # Baseline: Host Namespaces
    *[(f"{f}-false", spec_set(**{f: False}), ALLOWED, None) for f in ("hostNetwork", "hostPID", "hostIPC")],
    *[(f"{f}-true", spec_set(**{f: True}), "security-host-namespaces", "baseline")
      for f in ("hostNetwork", "hostPID", "hostIPC")],
    # Privileged Containers
    ("privileged-false", container_context(privileged=False), ALLOWED, None),
    ("privileged-true", container_context(privileged=True), "security-privileged-container", "baseline"),
    # Capabilities (baseline add list; restricted drop ALL, add only NET_BIND_SERVICE)
    ("add-net-bind-service", capabilities(add=["NET_BIND_SERVICE"], drop=["ALL"]), ALLOWED, None),
    ("add-sys-admin", capabilities(add=["SYS_ADMIN"], drop=["ALL"]), "security-added-capabilities", "baseline"),
    ("add-net-raw", capabilities(add=["NET_RAW"], drop=["ALL"]), "security-added-capabilities", "baseline"),
    ("add-chown", capabilities(add=["CHOWN"], drop=["ALL"]), "security-added-capabilities", "restricted"),
    ("no-drop-all", capabilities(drop=["NET_RAW"]), "security-added-capabilities", "restricted"),
    # HostPath Volumes
    ("host-path", volume("hostPath", {"path": "/var/log"}), "security-hostpath-volume", "baseline"),
    # Host Ports
    ("host-port-0", container_set(ports=[{"containerPort": 80, "hostPort": 0}]), ALLOWED, None),
    ("host-port-8080", container_set(ports=[{"containerPort": 80, "hostPort": 8080}]), "security-host-ports",
     "baseline"),
    # AppArmor (fields and annotation)
    ("apparmor-runtime-default", pod_context(appArmorProfile={"type": "RuntimeDefault"}), ALLOWED, None),
    ("apparmor-localhost", container_context(appArmorProfile={"type": "Localhost", "localhostProfile": "p"}),
     ALLOWED, None),
    ("apparmor-unconfined", container_context(appArmorProfile={"type": "Unconfined"}), "security-apparmor",
     "baseline"),
    ("apparmor-annotation-localhost", annotate("container.apparmor.security.beta.kubernetes.io/main", "localhost/p"),
     ALLOWED, None),
    ("apparmor-annotation-unconfined", annotate("container.apparmor.security.beta.kubernetes.io/main", "unconfined"),
     "security-apparmor", "baseline"),
    # SELinux
    *[(f"selinux-{t}", pod_context(seLinuxOptions={"type": t}), ALLOWED, None)
      for t in ("container_t", "container_init_t", "container_kvm_t", "container_engine_t")],
    ("selinux-spc-t", container_context(seLinuxOptions={"type": "spc_t"}), "security-selinux", "baseline"),
    ("selinux-user", pod_context(seLinuxOptions={"user": "system_u"}), "security-selinux", "baseline"),
    ("selinux-role", container_context(seLinuxOptions={"role": "system_r"}), "security-selinux", "baseline"),
    # /proc Mount Type
    ("proc-mount-default", container_context(procMount="Default"), ALLOWED, None),
    ("proc-mount-unmasked", container_context(procMount="Unmasked"), "security-proc-mount", "baseline"),
    # Seccomp (baseline: not Unconfined; restricted: set on the pod or every container)
    ("seccomp-localhost", pod_context(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}),
     ALLOWED, None),
    ("seccomp-unconfined", container_context(seccompProfile={"type": "Unconfined"}), "security-seccomp", "baseline"),
    ("seccomp-unset", drop_from("pod", "seccompProfile"), "security-seccomp", "restricted"),
    # Sysctls
    *[(f"sysctl-{name}", sysctl(name), ALLOWED, None)
      for name in ("kernel.shm_rmid_forced", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_keepalive_time",
                   "net.ipv4.tcp_rmem", "net.ipv4.tcp_notsent_lowat")],
    ("sysctl-kernel.msgmax", sysctl("kernel.msgmax"), "security-sysctls", "baseline"),
    # HostProcess
    ("host-process-false", pod_context(windowsOptions={"hostProcess": False}), ALLOWED, None),
    ("host-process-true", container_context(windowsOptions={"hostProcess": True}), "security-host-process",
     "baseline"),
    # Host Probes / Lifecycle Hooks
    ("probe-host-empty", probe(""), ALLOWED, None),
    ("probe-host-set", probe("10.0.0.1"), "security-host-probes", "baseline"),
    # Restricted: Volume Types
    *[(f"volume-{source}", volume(source, value), ALLOWED, None) for source, value in (
        ("configMap", {"name": "c"}), ("secret", {"secretName": "s"}), ("emptyDir", {}), ("downwardAPI", {}),
        ("persistentVolumeClaim", {"claimName": "c"}), ("projected", {"sources": []}),
        ("csi", {"driver": "csi.example.com"}), ("ephemeral", {"volumeClaimTemplate": {"spec": {}}}))],
    ("volume-nfs", volume("nfs", {"server": "nfs", "path": "/"}), "security-volume-types", "restricted"),
    ("volume-git-repo", volume("gitRepo", {"repository": "https://example.com/r.git"}), "security-volume-types",
     "restricted"),
    # Privilege Escalation
    ("escalation-true", container_context(allowPrivilegeEscalation=True), "security-privilege-escalation",
     "restricted"),
    ("escalation-unset", drop_from("container", "allowPrivilegeEscalation"), "security-privilege-escalation",
     "restricted"),
    # Running as Non-root
    ("non-root-on-container", container_context(runAsNonRoot=True), ALLOWED, None),
    ("non-root-false", pod_context(runAsNonRoot=False), "security-run-as-non-root", "restricted"),
    ("non-root-unset", drop_from("pod", "runAsNonRoot"), "security-run-as-non-root", "restricted"),
    # Running as Non-root user
    ("run-as-user-1000", pod_context(runAsUser=1000), ALLOWED, None),
    ("run-as-user-0", container_context(runAsUser=0), "security-run-as-user", "restricted"),
]

PSS_RULES = {rule for _, _, rule, _ in CASES if rule != ALLOWED}


def manifest(case_id: str, change: Callable[[Pod], None]) -> Pod:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": case_id.lower().replace(".", "-")[:60],
                                                            "namespace": "web"},
           "spec": copy.deepcopy(RESTRICTED_SPEC)}
    change(pod)
    return pod


MANIFESTS = {case_id: manifest(case_id, change) for case_id, change, _, _ in CASES}


def test_every_check_has_an_allowed_and_a_disallowed_case():
    assert PSS_RULES == {p.name for p in POLICIES.glob("security-*")}
    assert sum(1 for _, _, rule, _ in CASES if rule == ALLOWED) >= len(PSS_RULES)
