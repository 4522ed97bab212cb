"""Where a pod can send traffic, as Kubernetes NetworkPolicies define it, and whether that is inside.

A pod's egress is unrestricted unless some NetworkPolicy of its namespace selects it for egress
(``policyTypes`` names ``Egress``, or, not given, the policy has an ``egress`` section: the default
the API server applies, k8s.io/api networking/v1 types.go, ``NetworkPolicySpec.PolicyTypes``); then
it may reach the union of the egress rules of every such policy (additive allow-lists). A rule
without ``to`` reaches every destination; a peer is an ``ipBlock`` (a CIDR less its ``except``
ranges), or pods: ``podSelector`` alone selects pods of the policy's namespace, ``namespaceSelector``
alone every pod of the namespaces it selects, both together the pods they both select (types.go,
``NetworkPolicyPeer``). Ports narrow a rule, never widen it: they do not decide whether a
destination is reachable at all.

A sensitive pod is **confined** when nothing it can reach, directly or through the pods it can
reach, leads outside: an address beyond the configured internal ranges, a pod no egress policy
selects, a rule without ``to``. Pods of an allowed peer (the cluster's DNS) are not followed, so a
tenant cannot relay through a pod of its own, and pods reaching each other in a cycle stay inside.
Pods of one namespace with the same labels are selected alike, so reachability is searched over
those classes, breadth first: a namespace of 10,000 pods with a few label sets is a few nodes.
Pure: the policies, namespaces and pods are given.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .workloads import labels_of, selector_matches

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
PodClass = tuple[str, frozenset[tuple[str, str]]]  # a namespace and a label set: pods selected alike


@dataclass(frozen=True)
class AllowedPeer:
    """Pods every confined pod may reach: a namespace and a label selector (the cluster's DNS)."""

    namespace: str
    selector: Mapping[str, Any]


@dataclass(frozen=True)
class Egress:
    """A pod's egress: whether it stays inside, why not, and the policies that confine it."""

    confined: bool
    reasons: tuple[str, ...] = ()  # each way out, naming the policy and rule that opens it
    policies: tuple[str, ...] = ()  # namespace/name of every policy selecting the pod for egress


@dataclass(frozen=True)
class NetworkObjects:
    """What effective egress is computed from, as a cluster view holds it at one ``version``: the
    NetworkPolicies, each Namespace's labels, the Pods and the Services."""

    version: tuple[int, ...]
    policies: Sequence[Mapping[str, Any]]
    namespaces: Mapping[str, Mapping[str, str]]
    pods: Sequence[Mapping[str, Any]]
    services: Sequence[Mapping[str, Any]]


PeerKey = tuple[str, bytes]  # a pod peer: its policy's namespace and the peer as canonical JSON


@dataclass
class _Rules:
    """What pods selected by the same egress policies may reach: ways out, pod peers (with the rule
    that allows each), and the policies (namespace/name)."""

    ways_out: list[str]
    peers: list[tuple[PeerKey, str]]
    policies: tuple[str, ...]


@dataclass
class Cluster:
    """What effective egress is computed from: NetworkPolicies, Namespaces (their labels) and Pods.

    Indexed once, then cached per question: which policies a label set matches (by each distinct
    podSelector of its namespace), what those policies allow, which pods a peer selects."""

    policies: Sequence[Mapping[str, Any]]
    namespaces: Mapping[str, Mapping[str, str]]
    pods: Sequence[Mapping[str, Any]]
    internal: tuple[Network, ...] = ()
    allowed_peers: tuple[AllowedPeer, ...] = ()
    _selectors: dict[str, dict[bytes, tuple[Mapping[str, Any], list[Mapping[str, Any]]]]] = field(
        default_factory=dict, repr=False)
    _classes: dict[str, dict[frozenset[tuple[str, str]], str]] = field(default_factory=dict, repr=False)
    _rules: dict[tuple[str, frozenset[bytes]], _Rules] = field(default_factory=dict, repr=False)
    _class_rules: dict[PodClass, _Rules] = field(default_factory=dict, repr=False)
    _peers: dict[PeerKey, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    _reached: dict[PeerKey, list[PodClass]] = field(default_factory=dict, repr=False)
    _leaky: set[int] | None = field(default=None, repr=False)  # the rule sets whose pods' egress leads outside
    _held_sets: set[int] = field(default_factory=set, repr=False)  # the rule sets of the pods held

    def __post_init__(self) -> None:
        for policy in self.policies:
            if _applies_to_egress(policy):
                selector = (policy.get("spec") or {}).get("podSelector") or {}
                by_selector = self._selectors.setdefault(namespace_of(policy), {})
                by_selector.setdefault(_canonical(selector), (selector, []))[1].append(policy)
        for pod in self.pods:  # each label set of a namespace, named by its first pod
            self._classes.setdefault(namespace_of(pod), {}).setdefault(_label_set(pod), name_of(pod))

    def holds(self, pod_class: PodClass) -> bool:
        """Whether pods of this class are among the cluster's (a new pod of a class held changes nothing)."""
        return pod_class[1] in self._classes.get(pod_class[0], {})

    def rules_of(self, pod_class: PodClass) -> _Rules:
        """What the egress policies selecting ``pod_class`` allow (one computation per set of policies)."""
        if pod_class in self._class_rules:
            return self._class_rules[pod_class]
        namespace, labels = pod_class
        selectors = self._selectors.get(namespace, {})
        matched = frozenset(key for key, (selector, _) in selectors.items() if selector_matches(selector, dict(labels)))
        if (namespace, matched) not in self._rules:
            self._rules[(namespace, matched)] = self._allowed_by(
                [policy for key in sorted(matched) for policy in selectors[key][1]])
        self._class_rules[pod_class] = rules = self._rules[(namespace, matched)]
        return rules

    def confined(self, pod_class: PodClass) -> bool:
        """Whether pods of this class stay inside: ``egress_of``'s verdict without its reasons, for
        every class at once. Pods selected by the same policies reach the same pods, so the verdict
        belongs to each distinct rule set: those leading outside directly, then every rule set
        reaching one of those, found once per cluster over the rule sets (not once per class)."""
        if self._leaky is None:
            self._leaky = self._leading_outside()
        rules = self.rules_of(pod_class)
        if id(rules) in self._held_sets:
            return id(rules) not in self._leaky
        # a class no pod has yet (the pod being judged), selected by policies no held pod is: one step
        return bool(rules.policies) and not rules.ways_out and not any(
            id(self.rules_of(target)) in self._leaky for peer_key, _ in rules.peers
            for target in self.reached_by(peer_key))

    def _leading_outside(self) -> set[int]:
        rule_sets = {id(self.rules_of((namespace, labels))): self.rules_of((namespace, labels))
                     for namespace, classes in self._classes.items() for labels in classes}
        self._held_sets = set(rule_sets)
        peer_sets: dict[PeerKey, set[int]] = {}
        reached_from: dict[int, set[int]] = {}  # a rule set -> the rule sets whose pods reach its pods
        for key, rules in rule_sets.items():
            for peer_key, _ in rules.peers:
                if peer_key not in peer_sets:
                    peer_sets[peer_key] = {id(self.rules_of(target)) for target in self.reached_by(peer_key)}
                for target in peer_sets[peer_key]:
                    reached_from.setdefault(target, set()).add(key)
        leaky = {key for key, rules in rule_sets.items() if rules.ways_out or not rules.policies}
        waiting = deque(leaky)
        while waiting:
            for source in reached_from.get(waiting.popleft(), ()):
                if source not in leaky:
                    leaky.add(source)
                    waiting.append(source)
        return leaky

    def reached_by(self, peer_key: PeerKey) -> list[PodClass]:
        """The classes of pods a pod peer selects, but those of an allowed peer."""
        if peer_key not in self._reached:
            self._reached[peer_key] = self._selected(peer_key[0], self._peers[peer_key])
        return self._reached[peer_key]

    def _allowed_by(self, selecting: list[Mapping[str, Any]]) -> _Rules:
        ways_out: list[str] = []
        peers: list[tuple[PeerKey, str]] = []
        for policy in selecting:
            for index, rule in enumerate((policy.get("spec") or {}).get("egress") or []):
                where = f"NetworkPolicy {namespace_of(policy)}/{name_of(policy)} egress[{index}]"
                to = rule.get("to") if isinstance(rule, Mapping) else None
                if not to:
                    ways_out.append(f"{where} allows every destination (no `to`)")
                    continue
                for peer in to:
                    block = peer.get("ipBlock")
                    if isinstance(block, Mapping):
                        ways_out += [f"{where} {why}" for why in _block_outside(block, self.internal)]
                    else:
                        key = (namespace_of(policy), _canonical(peer))
                        self._peers[key] = peer
                        peers.append((key, where))
        return _Rules(ways_out, peers, tuple(sorted({f"{namespace_of(p)}/{name_of(p)}" for p in selecting})))

    def _selected(self, namespace: str, peer: Mapping[str, Any]) -> list[PodClass]:
        namespace_selector = peer.get("namespaceSelector")
        if namespace_selector is None:
            namespaces = [namespace]
        else:
            namespaces = sorted(n for n, labels in self.namespaces.items()
                                if selector_matches(namespace_selector, labels))
        return [(name, labels) for name in namespaces for labels in self._classes.get(name, {})
                if ("podSelector" not in peer or selector_matches(peer["podSelector"], dict(labels)))
                and not any(name == allowed.namespace and selector_matches(allowed.selector, dict(labels))
                            for allowed in self.allowed_peers)]


def internal_networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The configured internal ranges (IPv4 and IPv6)."""
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def egress_of(pod: Mapping[str, Any], cluster: Cluster) -> Egress:
    """The effective egress of ``pod`` (its namespace in its metadata) among ``cluster``: breadth
    first over the classes of pods it reaches, each class and each peer looked at once."""
    root = class_of(pod)
    names = {root: name_of(pod)}
    reached_by: dict[PodClass, tuple[PodClass, str] | None] = {root: None}
    followed: set[PeerKey] = set()
    waiting = deque([root])
    while waiting:
        current = waiting.popleft()
        rules = cluster.rules_of(current)
        ways_out = rules.ways_out if rules.policies else [
            f"no NetworkPolicy selects pod {current[0]}/{names[current]} for egress: it may reach any address"]
        if ways_out:
            return Egress(False, _reasons(current, ways_out, reached_by, names), cluster.rules_of(root).policies)
        for peer_key, via in rules.peers:
            if peer_key in followed:
                continue
            followed.add(peer_key)
            for target in cluster.reached_by(peer_key):
                if target not in reached_by:
                    reached_by[target] = (current, via)
                    names[target] = cluster._classes[target[0]][target[1]]
                    waiting.append(target)
    return Egress(True, (), cluster.rules_of(root).policies)


def _reasons(found: PodClass, ways_out: list[str], reached_by: Mapping[PodClass, tuple[PodClass, str] | None],
             names: Mapping[PodClass, str]) -> tuple[str, ...]:
    """The ways out of the pod first asked about, or the path to the pod that has one."""
    step = reached_by[found]
    if step is None:
        return tuple(ways_out)
    path = []
    while step is not None:
        previous, via = step
        path.append(f"{via} reaches pod {found[0]}/{names[found]}")
        found, step = previous, reached_by[previous]
    return (f"{'; '.join(reversed(path))}, whose egress leads outside: {ways_out[0]}",)


def _block_outside(block: Mapping[str, Any], internal: tuple[Network, ...]) -> list[str]:
    excepted = [str(e) for e in block.get("except") or []]
    left = _beyond(str(block.get("cidr")), excepted, internal)
    if not left:
        return []
    written = str(block.get("cidr")) + (f" except {', '.join(excepted)}" if excepted else "")
    return [f"allows {written}, which reaches {left[0]} outside the internal ranges"]


def _beyond(cidr: str, excepted: list[str], internal: tuple[Network, ...]) -> list[Network]:
    """The parts of ``cidr`` less ``excepted`` that lie outside every internal range (empty: inside)."""
    left = [ipaddress.ip_network(cidr, strict=False)]
    for other in [*(ipaddress.ip_network(e, strict=False) for e in excepted), *internal]:
        left = [part for network in left for part in _minus(network, other)]
    return left


def _minus(network: Network, other: Network) -> list[Network]:
    if network.version != other.version or not network.overlaps(other):
        return [network]
    if network.subnet_of(other):  # type: ignore[arg-type]
        return []
    return list(network.address_exclude(other))  # type: ignore[arg-type]


def _applies_to_egress(policy: Mapping[str, Any]) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    return "Egress" in types if types else "egress" in spec


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def class_of(pod: Mapping[str, Any]) -> PodClass:
    """The class a pod is selected in: its namespace and its label set."""
    return namespace_of(pod), _label_set(pod)


def _label_set(pod: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset((str(k), str(v)) for k, v in labels_of(pod).items())


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
