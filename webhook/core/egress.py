"""Where a pod can send traffic, as Kubernetes NetworkPolicies define it, and whether that is inside.

A pod's egress is unrestricted unless some NetworkPolicy of its namespace selects it for egress
(``policyTypes`` names ``Egress``, or, not given, the policy has an ``egress`` section: the default
the API server applies, k8s.io/api networking/v1 types.go, ``NetworkPolicySpec.PolicyTypes``); then
it may reach the union of the egress rules of every such policy (additive allow-lists). A rule
without ``to`` reaches every destination; a peer is an ``ipBlock`` (a CIDR less its ``except``
ranges), or pods: ``podSelector`` alone selects pods of the policy's namespace, ``namespaceSelector``
alone every pod of the namespaces it selects, both together the pods they both select (types.go,
``NetworkPolicyPeer``). Ports narrow a rule, never widen it: they do not decide whether a
destination is reachable at all. An ``ipBlock`` reaches pods too when it covers their addresses (the
e2e netpol suite allows a pod by its IP/32): one overlapping the pod network (``pod_networks``)
reaches every pod, since a pod's address is only known after it is admitted.

sig-network's AdminNetworkPolicies and BaselineAdminNetworkPolicy (``policy.networking.k8s.io``,
v1alpha1; network-policy-api ``apis/v1alpha1``) sit above and below: their rules are checked in
priority order (lower first), each in the order written, and the first rule matching decides:
``Allow`` (reachable whatever NetworkPolicies say), ``Deny``, or ``Pass`` (skip the remaining admin
rules); what no admin rule decides, or what a ``Pass`` hands on, goes to the NetworkPolicies if any
selects the pod for egress, and otherwise to the baseline's rules (``Allow``, ``Deny``), then is
allowed. This is computed over regions of destinations (addresses outside the internal ranges, and
classes of pods): a rule with ``ports`` decides only some traffic to its peers, so it removes nothing
from what is still undecided (it may still allow or pass). ``nodes`` peers are the admin's machines,
inside like the internal ranges.

A sensitive pod is **confined** when nothing it can reach, directly or through the pods it can
reach, leads outside: an address beyond the configured internal ranges, a pod no egress policy
selects, a rule without ``to``. Pods of an allowed peer (the cluster's DNS) are not followed, so a
tenant cannot relay through a pod of its own, and pods reaching each other in a cycle stay inside.
Pods of one namespace with the same labels are selected alike, so reachability is searched over
those classes, breadth first: a namespace of 10,000 pods with a few label sets is a few nodes.
Pure: the policies, namespaces and pods are given.
"""

from __future__ import annotations

import functools
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
    admin: Sequence[Mapping[str, Any]] = ()  # AdminNetworkPolicies (where their CRD is served)
    baseline: Sequence[Mapping[str, Any]] = ()  # BaselineAdminNetworkPolicies


PeerKey = tuple[str, bytes]  # a pod peer: its policy's namespace and the peer as canonical JSON
EVERY_POD: PeerKey = ("", b"*")  # every pod of the cluster: an address range covering the pod network
EVERYTHING: PeerKey = ("", b"**")  # every address outside and every pod
_Subjects = dict[bytes, tuple[Any, list[int]]]  # admin policies by subject: the subject, their indices


@dataclass
class _Rules:
    """What pods selected by the same egress policies may reach: ways out, pod peers (with the rule
    that allows each), and the policies (namespace/name)."""

    ways_out: list[str]
    peers: list[tuple[PeerKey, str]]
    policies: tuple[str, ...]
    isolated: bool = True  # False: no policy restricts their egress, they may reach any address


@dataclass(frozen=True)
class _Region:
    """Destinations: address ranges outside the internal ones, and classes of pods."""

    addresses: tuple[Network, ...] = ()
    pods: frozenset[PodClass] = frozenset()

    def __and__(self, other: _Region) -> _Region:
        return _Region(_intersection(self.addresses, other.addresses), self.pods & other.pods)

    def __or__(self, other: _Region) -> _Region:
        return _Region(_union(self.addresses, other.addresses), self.pods | other.pods)

    def __sub__(self, other: _Region) -> _Region:
        return _Region(_difference(self.addresses, other.addresses), self.pods - other.pods)


@dataclass(frozen=True)
class _Decision:
    """An admin rule over regions: what it may match (``wide``) and what it decides for all traffic
    (``narrow``: nothing when ports narrow it)."""

    action: str
    wide: _Region
    narrow: _Region
    where: str


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
    admin: Sequence[Mapping[str, Any]] = ()  # AdminNetworkPolicies
    baseline: Sequence[Mapping[str, Any]] = ()  # BaselineAdminNetworkPolicies
    pod_networks: tuple[Network, ...] | None = None  # the pod network; None: every internal range may hold pods
    _selectors: dict[str, dict[bytes, tuple[Mapping[str, Any], list[Mapping[str, Any]]]]] = field(
        default_factory=dict, repr=False)
    _keys: frozenset[str] = field(default=frozenset(), repr=False)  # the label keys this model's selectors read
    _classes: dict[str, dict[frozenset[tuple[str, str]], str]] = field(default_factory=dict, repr=False)
    _rules: dict[tuple[str, frozenset[bytes], tuple[int, ...], tuple[int, ...]], _Rules] = field(
        default_factory=dict, repr=False)
    _class_rules: dict[PodClass, _Rules] = field(default_factory=dict, repr=False)
    _peers: dict[PeerKey, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    _reached: dict[PeerKey, list[PodClass]] = field(default_factory=dict, repr=False)
    _regions: dict[PeerKey, _Region] = field(default_factory=dict, repr=False)  # the admin tiers' regions, by peer
    _subjects: dict[tuple[bytes, Any], bool] = field(default_factory=dict, repr=False)  # (subject, where): selects?
    _admin_subjects: _Subjects = field(default_factory=dict, repr=False)
    _baseline_subjects: _Subjects = field(default_factory=dict, repr=False)
    _leaky: set[int] | None = field(default=None, repr=False)  # the rule sets whose pods' egress leads outside
    _held_sets: set[int] = field(default_factory=set, repr=False)  # the rule sets of the pods held

    def __post_init__(self) -> None:
        for policy in self.policies:
            if _applies_to_egress(policy):
                selector = (policy.get("spec") or {}).get("podSelector") or {}
                by_selector = self._selectors.setdefault(namespace_of(policy), {})
                by_selector.setdefault(_canonical(selector), (selector, []))[1].append(policy)
        self._keys = selector_keys(self.policies, self.admin, self.baseline,
                                   [allowed.selector for allowed in self.allowed_peers])
        for pod in self.pods:  # each label set of a namespace, named by its first pod
            self._classes.setdefault(namespace_of(pod), {}).setdefault(self.class_of(pod)[1], name_of(pod))
        self.admin = sorted((p for p in self.admin if _egress_rules(p)),
                            key=lambda p: (_priority(p), name_of(p)))  # same priority: undefined; by name
        self.baseline = sorted((p for p in self.baseline if _egress_rules(p)), key=name_of)
        self._admin_subjects, self._baseline_subjects = _by_subject(self.admin), _by_subject(self.baseline)
        if self.pod_networks is None:
            self.pod_networks = self.internal

    def class_of(self, pod: Mapping[str, Any]) -> PodClass:
        """The class a pod is selected in: its namespace and its labels that some selector reads.

        Only those: no selector can tell apart two pods that differ in a label none reads, and a label
        every pod has its own value of (Volcano's ``volcano.sh/task-index``) made each pod a class, so
        each new pod of a 1,000-pod gang cost a pass over every class (bench/gang.py). Exact: every
        selector evaluated against a class is one of this model's (policies, admin tiers, allowed
        peers); Services' selectors are matched against each pod's own labels (egress_judge)."""
        return namespace_of(pod), frozenset((str(k), str(v)) for k, v in labels_of(pod).items()
                                            if str(k) in self._keys)

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
        admin = self._subject_of(self._admin_subjects, pod_class)
        baseline = self._subject_of(self._baseline_subjects, pod_class)
        key = (namespace, matched, admin, baseline)
        if key not in self._rules:
            selecting = [policy for found in sorted(matched) for policy in selectors[found][1]]
            self._rules[key] = self._allowed_by(selecting) if not admin and not baseline else self._tiered(
                namespace, selecting, [self.admin[i] for i in admin], [self.baseline[i] for i in baseline])
        self._class_rules[pod_class] = rules = self._rules[key]
        return rules

    def _subject_of(self, subjects: _Subjects, pod_class: PodClass) -> tuple[int, ...]:
        """Which admin policies select pods of ``pod_class`` (their indices), from their distinct
        subjects (admin policies repeat a few, most by namespace alone): each matched once per
        namespace, or per class when it selects pods by their labels."""
        found: list[int] = []
        for key, (subject, indices) in subjects.items():
            by_labels = isinstance(subject, Mapping) and "namespaces" not in subject
            where = (key, pod_class if by_labels else pod_class[0])
            if where not in self._subjects:
                self._subjects[where] = _subject_selects(subject, self._namespace_labels(pod_class[0]),
                                                         dict(pod_class[1]))
            if self._subjects[where]:
                found += indices
        return tuple(sorted(found))

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
        return rules.isolated and not rules.ways_out and not any(
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
        leaky = {key for key, rules in rule_sets.items() if rules.ways_out or not rules.isolated}
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
            self._reached[peer_key] = sorted(self._all_pods().pods) if peer_key == EVERY_POD else \
                self._selected(peer_key[0], self._peers[peer_key])
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
                        if self._covers_pods(_block_networks(block)):
                            peers.append((EVERY_POD, f"{where} (ipBlock {block.get('cidr')}, the pod network)"))
                    else:
                        key = (namespace_of(policy), _canonical(peer))
                        self._peers[key] = peer
                        peers.append((key, where))
        return _Rules(ways_out, peers, _names(selecting), isolated=bool(selecting))

    def _covers_pods(self, networks: Sequence[Network]) -> bool:
        return any(n.overlaps(p) for n in networks for p in self.pod_networks or ()
                   if n.version == p.version)

    def _tiered(self, namespace: str, selecting: list[Mapping[str, Any]], admin: list[Mapping[str, Any]],
                baseline: list[Mapping[str, Any]]) -> _Rules:
        """What pods selected by these admin policies and NetworkPolicies reach, tier by tier."""
        undecided, passed = self._everything(), _Region()
        reached: list[tuple[_Region, str]] = []
        for decision in (d for policy in admin for d in self._decisions(policy, "AdminNetworkPolicy")):
            if decision.action == "Allow":
                reached.append((undecided & decision.wide, decision.where))
            elif decision.action == "Pass":
                passed = passed | (undecided & decision.wide)
            undecided = undecided - decision.narrow
        onwards = undecided | passed
        if selecting:
            reached += [(onwards & region, where) for region, where in self._network_policy_regions(selecting)]
        else:
            for decision in (d for policy in baseline for d in self._decisions(policy, "BaselineAdminNetworkPolicy")):
                if decision.action == "Allow":
                    reached.append((onwards & decision.wide, decision.where))
                onwards = onwards - decision.narrow
            reached.append((onwards, f"no NetworkPolicy of {namespace} selects these pods for egress and no admin "
                                     "policy denies the rest: what is left"))
        ways_out = [f"{where} reaches {min(region.addresses, key=_address_order)} outside the internal ranges"
                    for region, where in reached if region.addresses]
        peers: list[tuple[PeerKey, str]] = []
        for region, where in reached:
            if region.pods:
                key = (namespace, f"#{len(self._reached)}".encode())
                self._reached[key] = sorted(region.pods)
                peers.append((key, where))
        named = [f"{kind} {name_of(p)}" for kind, found in (("AdminNetworkPolicy", admin),
                                                             ("BaselineAdminNetworkPolicy", baseline)) for p in found]
        return _Rules(ways_out, peers, (*_names(selecting), *named))

    def _decisions(self, policy: Mapping[str, Any], kind: str) -> list[_Decision]:
        found = []
        for index, rule in enumerate(_egress_rules(policy)):
            wide = narrow = _Region()
            for peer in rule.get("to") or []:
                widest, certain = self._admin_peer(peer)
                wide, narrow = wide | widest, narrow | certain
            action = str(rule.get("action"))
            label = f" ({rule['name']})" if rule.get("name") else ""
            found.append(_Decision(action, wide, _Region() if rule.get("ports") else narrow,
                                   f"{kind} {name_of(policy)} egress[{index}]{label} {action}"))
        return found

    def _admin_peer(self, peer: Mapping[str, Any]) -> tuple[_Region, _Region]:
        """An admin egress peer's destinations: what it may match, and what it surely matches."""
        if not isinstance(peer, Mapping):
            return _Region(), _Region()
        if isinstance(peer.get("namespaces"), Mapping):
            region = self._pods_region("", {"namespaceSelector": peer["namespaces"]})
            return region, region
        pods = peer.get("pods")
        if isinstance(pods, Mapping):
            selected = {"namespaceSelector": pods.get("namespaceSelector") or {},
                        "podSelector": pods.get("podSelector") or {}}
            region = self._pods_region("", selected)
            return region, region
        if isinstance(peer.get("networks"), list):
            networks = [ipaddress.ip_network(str(cidr), strict=False) for cidr in peer["networks"]]
            addresses = _Region(_difference(tuple(networks), self.internal))
            # pods whose addresses it may cover: every pod (a pod's address is not known when it is
            # admitted); surely every pod only when it covers the whole pod network
            surely = bool(self.pod_networks) and all(any(p.version == n.version and p.subnet_of(n)  # type: ignore[arg-type]
                                                         for n in networks) for p in self.pod_networks or ())
            return (addresses | self._all_pods() if self._covers_pods(networks) else addresses), \
                addresses | self._all_pods() if surely else addresses
        if "nodes" in peer:
            return _Region(), _Region()  # the admin's machines: inside
        return self._everything(), _Region()  # a peer this version does not know: it may match anything

    def _network_policy_regions(self, selecting: list[Mapping[str, Any]]) -> list[tuple[_Region, str]]:
        """What NetworkPolicies selecting a pod allow, each rule's peers as a region (for the tiers)."""
        found = []
        for policy in selecting:
            for index, rule in enumerate((policy.get("spec") or {}).get("egress") or []):
                where = f"NetworkPolicy {namespace_of(policy)}/{name_of(policy)} egress[{index}]"
                to = rule.get("to") if isinstance(rule, Mapping) else None
                if not to:
                    found.append((self._everything(), f"{where} (no `to`)"))
                for peer in to or []:
                    block = peer.get("ipBlock")
                    if isinstance(block, Mapping):
                        networks = _block_networks(block)
                        found.append((_Region(_difference(tuple(networks), self.internal))
                                      | (self._all_pods() if self._covers_pods(networks) else _Region()), where))
                    else:
                        found.append((self._pods_region(namespace_of(policy), peer), where))
        return found

    def _pods_region(self, namespace: str, peer: Mapping[str, Any]) -> _Region:
        """The classes a pod peer selects, as a region: once per distinct peer (a thousand policies
        repeat a few peers)."""
        key = (namespace, _canonical(peer))
        if key not in self._regions:
            self._regions[key] = _Region(pods=frozenset(self._selected(namespace, peer)))
        return self._regions[key]

    def _everything(self) -> _Region:
        if EVERYTHING not in self._regions:
            every = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
            self._regions[EVERYTHING] = _Region(_difference(every, self.internal)) | self._all_pods()
        return self._regions[EVERYTHING]

    def _all_pods(self) -> _Region:
        if EVERY_POD not in self._regions:
            self._regions[EVERY_POD] = _Region(pods=frozenset(
                (namespace, labels) for namespace, classes in self._classes.items() for labels in classes
                if not self._allowed((namespace, labels))))
        return self._regions[EVERY_POD]

    def _selected(self, namespace: str, peer: Mapping[str, Any]) -> list[PodClass]:
        namespace_selector = peer.get("namespaceSelector")
        if namespace_selector is None:
            namespaces = [namespace]
        else:
            namespaces = sorted(n for n in {*self.namespaces, *self._classes}
                                if selector_matches(namespace_selector, self._namespace_labels(n)))
        return [(name, labels) for name in namespaces for labels in self._classes.get(name, {})
                if ("podSelector" not in peer or selector_matches(peer["podSelector"], dict(labels)))
                and not self._allowed((name, labels))]

    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels; one not known has the label the API server gives every namespace."""
        return self.namespaces.get(namespace) or {"kubernetes.io/metadata.name": namespace}

    def _allowed(self, pod_class: PodClass) -> bool:
        return any(pod_class[0] == allowed.namespace and selector_matches(allowed.selector, dict(pod_class[1]))
                   for allowed in self.allowed_peers)


def internal_networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The configured internal ranges (IPv4 and IPv6)."""
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def egress_of(pod: Mapping[str, Any], cluster: Cluster) -> Egress:
    """The effective egress of ``pod`` (its namespace in its metadata) among ``cluster``: breadth
    first over the classes of pods it reaches, each class and each peer looked at once."""
    root = cluster.class_of(pod)
    names = {root: name_of(pod)}
    reached_by: dict[PodClass, tuple[PodClass, str] | None] = {root: None}
    followed: set[PeerKey] = set()
    waiting = deque([root])
    while waiting:
        current = waiting.popleft()
        rules = cluster.rules_of(current)
        ways_out = rules.ways_out if rules.isolated else [
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


def _block_networks(block: Mapping[str, Any]) -> list[Network]:
    """An ipBlock's addresses: its CIDR less its ``except`` ranges."""
    return list(_networks_of(str(block.get("cidr")), tuple(str(e) for e in block.get("except") or [])))


@functools.lru_cache(maxsize=4096)
def _networks_of(cidr: str, excepted: tuple[str, ...]) -> tuple[Network, ...]:
    """A thousand policies repeat a few blocks: each parsed once."""
    return tuple(_beyond(cidr, list(excepted), ()))


def _address_order(network: Network) -> tuple[int, int, int]:
    return network.version, int(network.network_address), network.prefixlen


def _intersection(some: tuple[Network, ...], others: tuple[Network, ...]) -> tuple[Network, ...]:
    """Two CIDRs either nest or are apart: the common part of two is the smaller, if they overlap."""
    return tuple(a if a.prefixlen >= b.prefixlen else b for a in some for b in others
                 if a.version == b.version and a.overlaps(b))


def _difference(some: tuple[Network, ...], others: Sequence[Network]) -> tuple[Network, ...]:
    left = list(some)
    for other in others:
        left = [part for network in left for part in _minus(network, other)]
    return tuple(left)


def _union(some: tuple[Network, ...], others: tuple[Network, ...]) -> tuple[Network, ...]:
    return (*some, *_difference(others, some))


def _minus(network: Network, other: Network) -> list[Network]:
    if network.version != other.version or not network.overlaps(other):
        return [network]
    if network.subnet_of(other):  # type: ignore[arg-type]
        return []
    return list(network.address_exclude(other))  # type: ignore[arg-type]


def _egress_rules(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [rule for rule in (policy.get("spec") or {}).get("egress") or [] if isinstance(rule, Mapping)]


def _priority(policy: Mapping[str, Any]) -> int:
    value = (policy.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 1000


def _by_subject(policies: Sequence[Mapping[str, Any]]) -> _Subjects:
    """Admin policies' indices by their distinct subject."""
    found: _Subjects = {}
    for index, policy in enumerate(policies):
        subject = (policy.get("spec") or {}).get("subject")
        found.setdefault(_canonical(subject), (subject, []))[1].append(index)
    return found


def _subject_selects(subject: Any, namespace_labels: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """An admin policy's subject: every pod of the namespaces it selects, or the pods it selects in them."""
    if not isinstance(subject, Mapping):
        return False
    if isinstance(subject.get("namespaces"), Mapping):
        return selector_matches(subject["namespaces"], namespace_labels)
    pods = subject.get("pods")
    return isinstance(pods, Mapping) and selector_matches(pods.get("namespaceSelector") or {}, namespace_labels) \
        and selector_matches(pods.get("podSelector") or {}, labels)


def _names(policies: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(sorted({f"{namespace_of(p)}/{name_of(p)}" for p in policies}))


def _applies_to_egress(policy: Mapping[str, Any]) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    return "Egress" in types if types else "egress" in spec


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def selector_keys(*documents: Any) -> frozenset[str]:
    """Every label key a selector in ``documents`` reads: matchLabels, matchExpressions, a plain
    ``selector`` map. The documents are walked whole, so a selector in any field is found; a key that is
    not a pod's (a namespaceSelector's) only keeps a class apart that need not be."""
    keys: set[str] = set()
    stack: list[Any] = list(documents)
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for field, value in node.items():
                if field in ("matchLabels", "selector") and isinstance(value, Mapping):
                    keys.update(str(key) for key in value)
                elif field == "matchExpressions" and isinstance(value, list):
                    keys.update(str(e["key"]) for e in value if isinstance(e, Mapping) and "key" in e)
                stack.append(value)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return frozenset(keys)


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
