"""Issue 37: the decision log delivered to real collectors (Debian's rsyslog: imrelp plain and over TLS,
imtcp with the gtls driver for RFC 5425), through outages, refusals and hostile peers; and checked from
the collector's copy alone (``vgate audit verify --forwarded``)."""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest

from e2e.collectors import Records, Rsyslog, SyslogNg, collected_records, local_records, make_pki
from webhook.audit.delivery import Cursor, fully_delivered
from webhook.audit.log import DecisionLog
from webhook.core.config import ForwardSettings
from webhook.forward.collected import verify_forwarded
from webhook.forward.forwarder import Forwarder
from webhook.forward.message import parse
from webhook.forward.transport import connect

from helpers import VGATE, pod, review

KINDS = ["relp", "relp+tls", "syslog+tls", "syslog-ng"]  # the last: RFC 5425 to syslog-ng


def collector_for(kind: str, workdir: Path, pki: Path) -> Rsyslog:
    return SyslogNg(workdir, pki) if kind == "syslog-ng" else Rsyslog(workdir, kind, pki)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def settings(collector: Rsyslog, pki: Path | None = None, max_bytes: int = 8192,
             client: bool = True) -> ForwardSettings:
    tls = collector.kind.endswith("tls") and pki is not None
    return ForwardSettings(collector.url, str(pki / "ca.pem") if tls else None,
                           str(pki / "client.pem") if tls and client else None,
                           str(pki / "client.key") if tls and client else None, max_bytes)


def write_records(audit: Path, count: int, replica: str = "r1", note: str = "x") -> DecisionLog:
    log = DecisionLog(audit, replica=replica)
    for n in range(count):
        log.record({"endpoint": "validate", "uid": f"{replica}-{n}", "decision": "denied" if n % 5 == 0 else "allowed",
                    "note": note})
    return log


def collected(collector: Rsyslog) -> tuple[Records, int]:
    """What the collector's file holds of the log, and how many copies were duplicates: every line a
    record, every copy of one identical to its first."""
    held, duplicates, strays = collected_records(collector.lines())
    assert strays == [], strays[:3]
    return held, duplicates


def wait_delivered(forwarder: Forwarder, audit: Path, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if fully_delivered(audit, forwarder.settings.url):
            return
        time.sleep(0.2)
    raise AssertionError(f"not delivered within {seconds} s: {forwarder.counters}")


@pytest.mark.parametrize("kind", KINDS)
def test_every_record_reaches_the_collector_and_its_copy_verifies(kind, pki, tmp_path):
    collector = collector_for(kind, tmp_path / "collector", pki).start()
    try:
        audit = tmp_path / "audit"
        write_records(audit, 150, "r1")
        write_records(audit, 150, "r2")
        forwarder = Forwarder(settings(collector, pki), audit)
        assert forwarder.deliver() == 300
        time.sleep(forwarder._link.settle_seconds if forwarder._link else 0)
        forwarder.deliver()  # settles what syslog over TLS sent (RELP: already acknowledged)
        forwarder.close()
        held, duplicates = collected(collector)
        assert held == local_records(audit) and duplicates == 0
        first = parse(collector.lines()[0])
        assert first is not None and first.msgid == "validate-denied" and first.host == "r1"
        check = verify_forwarded(collector.out)
        assert (check.records, check.segments, check.findings) == (300, 2, [])
    finally:
        collector.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_a_collector_killed_mid_stream_and_restarted_misses_nothing(kind, pki, tmp_path):
    """Records written all along; the collector SIGKILLed twice, down 2 s each time, restarted on its
    port: afterwards every record of the local log is in its file, duplicates only where delivery was
    repeated, and the copy verifies."""
    collector = collector_for(kind, tmp_path / "collector", pki).start()
    audit = tmp_path / "audit"
    forwarder = Forwarder(settings(collector, pki), audit)
    writing = threading.Event()

    def write() -> None:
        log = DecisionLog(audit, replica="r1")
        for n in range(1500):
            log.record({"endpoint": "validate", "uid": f"u{n}", "decision": "allowed"})
            if n % 50 == 0:
                time.sleep(0.05)
        writing.set()

    writer = threading.Thread(target=write)
    writer.start()
    forwarder.run_forever(interval=0.05)
    try:
        for _ in range(2):
            time.sleep(1.0)
            collector.kill()
            time.sleep(2.0)
            collector.start()
        writer.join()
        wait_delivered(forwarder, audit)
    finally:
        forwarder.stop()
        collector.kill()
    held, duplicates = collected(collector)
    local = local_records(audit)
    missing = set(local) - set(held)
    print(f"{kind}: local {len(local)}, collector {len(held)} (+{duplicates} duplicates), missing {len(missing)}, "
          f"failures {forwarder.counters.failures}")
    assert len(local) == 1500 and not missing and held == local
    assert forwarder.counters.failures >= 2  # the outages were seen, not slept through
    check = verify_forwarded(collector.out)
    assert check.findings == [] and check.duplicates == duplicates


def test_a_wrong_server_certificate_is_refused_and_delivery_resumes_with_the_right_one(pki, tmp_path):
    wrong = Rsyslog(tmp_path / "wrong", "relp+tls", pki, server="wrong-server").start()
    audit = tmp_path / "audit"
    write_records(audit, 20)
    forwarder = Forwarder(settings(wrong, pki), audit)
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            forwarder.deliver()
    finally:
        wrong.kill()
    assert forwarder.counters.failures == 1 and "certificate verify failed" in (forwarder.counters.last_error or "")
    assert wrong.lines() == [] and not Cursor.load(audit, wrong.url).segments
    right = Rsyslog(tmp_path / "wrong", "relp+tls", pki)  # the collector fixed, on the same port
    right.port = wrong.port
    right.start()
    try:
        assert forwarder.deliver() == 20
    finally:
        forwarder.close()
        right.kill()
    assert collected(right)[0] == local_records(audit)


def test_mutual_tls_without_vgates_client_certificate_is_refused(pki, tmp_path):
    collector = Rsyslog(tmp_path / "collector", "relp+tls", pki).start()
    try:
        with pytest.raises(OSError):
            connect(settings(collector, pki, client=False), timeout=5).send([b"<110>1 - - vgate - test - hello"])
        assert collector.lines() == []
    finally:
        collector.kill()


def test_an_oversize_record_is_sent_as_a_placeholder_never_cut(tmp_path):
    collector = Rsyslog(tmp_path / "collector", "relp").start()
    try:
        audit = tmp_path / "audit"
        log = DecisionLog(audit, replica="r1")  # one writer: one chain
        for note in ("x", "x", "x", "y" * 20000, "x", "x", "x"):
            log.record({"endpoint": "validate", "uid": "u", "decision": "allowed", "note": note})
        forwarder = Forwarder(settings(collector, max_bytes=8192), audit)
        forwarder.deliver()
        forwarder.close()
    finally:
        collector.kill()
    messages = [parse(raw) for raw in collector.lines()]
    oversize = [m for m in messages if m is not None and m.msgid == "oversize"]
    assert forwarder.counters.oversize == 1 and len(oversize) == 1 and len(messages) == 7
    assert all(len(raw) <= 8192 for raw in collector.lines())
    [segment] = audit.glob("decisions-*.jsonl")  # one writer (this process): the big record is line 4
    big = segment.read_bytes().splitlines()[3]
    assert oversize[0].params["sha256"] == hashlib.sha256(big).hexdigest()
    assert verify_forwarded(collector.out).findings == []


def test_verify_forwarded_names_a_deleted_line_a_changed_record_and_a_lost_tail(tmp_path):
    collector = Rsyslog(tmp_path / "collector", "relp").start()
    try:
        audit = tmp_path / "audit"
        log = write_records(audit, 12)
        forwarder = Forwarder(settings(collector), audit)
        forwarder.deliver()
        forwarder.close()
    finally:
        collector.kill()
    lines = collector.lines()
    segment = f"decisions-{log.writer}"
    tampered = tmp_path / "tampered.log"
    edited = lines[7].replace(b'"uid":"r1-7"', b'"uid":"r1-X"')
    tampered.write_bytes(b"\n".join([*lines[:4], *lines[5:7], edited, *lines[8:], lines[2]]) + b"\n")
    run = subprocess.run([*VGATE, "audit", "verify", "--forwarded", str(tampered)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{segment}" in run.stdout and "record 5 is missing from the collector's copy" in run.stdout
    assert "record 9 does not link record 8: one of them was changed" in run.stdout
    assert "1 duplicates ignored" in run.stdout and "3 problems" not in run.stdout, run.stdout
    clean = subprocess.run([*VGATE, "audit", "verify", "--forwarded", str(collector.out)], capture_output=True,
                           text=True, timeout=60)
    assert clean.returncode == 0, clean.stdout
    assert "12 records in 1 segments and 0 anchor lines verified" in clean.stdout, clean.stdout


class _HostilePeer:
    """A TCP peer that answers garbage, closes after the first bytes, or never reads."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            if self.behaviour == "garbage":
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 100)
            elif self.behaviour == "close":
                conn.recv(16)
                conn.close()
            else:  # never reads: its receive window fills, the sender blocks
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                threading.Event().wait(120)


@pytest.mark.parametrize("behaviour", ["garbage", "close", "silent"])
def test_a_hostile_collector_never_blocks_the_decision_log_or_the_forwarder(behaviour, tmp_path):
    peer = _HostilePeer(behaviour)
    audit = tmp_path / "audit"
    write_records(audit, 200, note="z" * 2000)
    url = f"relp://127.0.0.1:{peer.port}"
    forwarder = Forwarder(ForwardSettings(url, None, None, None, 8192), audit,
                          link_factory=lambda s: connect(s, timeout=2))
    started = time.monotonic()
    with pytest.raises(OSError):
        forwarder.deliver()
    assert time.monotonic() - started < 10
    log = DecisionLog(audit, replica="r2")  # the admission path meanwhile: unaffected
    log.record({"endpoint": "validate", "uid": "during", "decision": "allowed"})
    assert not Cursor.load(audit, url).segments and forwarder.counters.delivered == 0
    peer.server.close()


def test_vgate_serve_forwards_every_decision(start_server, tmp_path):
    """The real server with audit.forward set: each AdmissionReview's decision reaches rsyslog."""
    collector = Rsyslog(tmp_path / "collector", "relp").start()
    try:
        server = start_server(config_text=f"audit:\n  forward:\n    url: {collector.url}\n", workers=2)
        for n in range(10):
            response = server.post("/validate", review(pod(f"p{n}")))
            assert response.status_code == 200
        # every record of the local log, the ten decisions and the workers' own events, until all are held
        deadline = time.monotonic() + 30
        while collected(collector)[0] != local_records(server.audit_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        held, duplicates = collected(collector)
        local = local_records(server.audit_dir)
        assert held == local and len(local) >= 10 and duplicates == 0, server.output()
        for raw in collector.lines():
            message = parse(raw)
            assert message is not None
            record = orjson.loads(message.msg)
            expected = f"validate-{record['decision']}" if "decision" in record else record["event"]
            assert message.msgid == expected and message.host == "test-replica", raw[:300]
        assert sum(b" validate-" in raw for raw in collector.lines()) == 10
    finally:
        collector.kill()
    assert os.stat(server.audit_dir / ".forward").st_mode & 0o777 == 0o700


def test_the_anchor_reaches_the_collector_and_bounds_a_lost_tail(tmp_path):
    """The report writer forwards its anchor lines: from the collector's copy alone, the last record
    of a writer's newest segment going missing (which no hash chain can show) is named against the
    hour's report; without the anchor lines the same copy looks complete."""
    from datetime import datetime, timezone

    from webhook.core.config import Config
    from webhook.files.config_file import load_config
    from webhook.reports.schedule import FIRST_HOUR, ReportScheduler

    from helpers import POLICIES, anchor_beside

    collector = Rsyslog(tmp_path / "collector", "relp").start()
    root = tmp_path / "volume"
    hour = datetime(2026, 12, 2, 10, tzinfo=timezone.utc)
    log = DecisionLog(root / "audit", replica="r1", clock=lambda: hour.replace(minute=30))
    for n in range(6):
        log.record({"endpoint": "validate", "uid": f"u{n}", "decision": "allowed"})
    (root / "reports").mkdir(parents=True)
    (root / "reports" / FIRST_HOUR).write_text("2026-12-02T10\n")
    document = load_config().document
    forward = {**document["audit"]["forward"], "url": collector.url}
    document = {**document, "audit": {**document["audit"], "dir": str(root / "audit"), "forward": forward},
                "reports": {**document["reports"], "dir": str(root / "reports"), "key": str(root / "keys" / "r.key"),
                            "anchorFile": str(anchor_beside(root))}}
    try:
        forwarder = Forwarder(Config("t", document).audit.forward, root / "audit")
        forwarder.deliver()
        forwarder.close()
        scheduler = ReportScheduler(lambda: Config("t", document), lambda: POLICIES)
        scheduler.tick(datetime(2026, 12, 2, 11, 5, tzinfo=timezone.utc))
        assert scheduler.refused == []
        other = tmp_path / "another-writer"  # a second report writer (its own key and anchor), same collector
        (other / "reports").mkdir(parents=True)
        (other / "reports" / FIRST_HOUR).write_text("2026-12-02T09\n")
        (other / "audit").mkdir()
        theirs = {**document, "audit": {**document["audit"], "dir": str(other / "audit")},
                  "reports": {**document["reports"], "dir": str(other / "reports"),
                              "key": str(other / "keys" / "r.key"), "anchorFile": str(anchor_beside(other))}}
        ReportScheduler(lambda: Config("t", theirs), lambda: POLICIES).tick(datetime(2026, 12, 2, 11, 5,
                                                                                     tzinfo=timezone.utc))
    finally:
        collector.kill()
    anchored = [raw for raw in collector.lines() if b" anchor [" in raw]
    ours = len(anchor_beside(root).read_bytes().splitlines())
    assert len(anchored) == ours + len(anchor_beside(other).read_bytes().splitlines()) and ours >= 1
    assert len({parse(raw).params["anchorId"] for raw in anchored}) == 2  # type: ignore[union-attr]
    check = verify_forwarded(collector.out)
    assert check.findings == [] and check.anchor_lines == len(anchored) and check.records == 6
    lines = collector.lines()
    tail = next(i for i, raw in enumerate(lines) if b'seq="6"' in raw)
    cut = tmp_path / "cut.log"
    cut.write_bytes(b"\n".join(lines[:tail] + lines[tail + 1:]) + b"\n")
    assert [f.problem for f in verify_forwarded(cut).findings] == [
        "the report of 2026-12-02T10 (version 1) signed 6 lines of the decision log; the collector's copy holds 5 of "
        "them"]
    pubkey = root / "keys" / "r.key.pub"
    signed = subprocess.run([*VGATE, "audit", "verify", "--forwarded", str(collector.out), "--pubkey", str(pubkey)],
                            capture_output=True, text=True, timeout=60)
    assert signed.returncode == 0 and "checked against" in signed.stdout, signed.stdout + signed.stderr
    assert "anchors of other keys, not checked: " in signed.stdout
    forged = tmp_path / "forged.log"  # the last anchor line's figures raised, by someone without the key
    last = max(i for i, raw in enumerate(lines) if b" anchor [" in raw and b'"records":6' in raw)  # our hour
    forged.write_bytes(b"\n".join([*lines[:last], lines[last].replace(b'"records":6', b'"records":9'),
                                   *lines[last + 1:]]) + b"\n")
    assert b'"records":6' in lines[last]
    run = subprocess.run([*VGATE, "audit", "verify", "--forwarded", str(forged), "--pubkey", str(pubkey)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "its signature does not verify with the report public key" in run.stdout, \
        run.stdout
    without = tmp_path / "without-anchor.log"
    without.write_bytes(b"\n".join(raw for raw in lines[:tail] + lines[tail + 1:] if b" anchor [" not in raw) + b"\n")
    assert verify_forwarded(without).findings == []  # what the anchor lines add


def test_a_collector_name_that_does_not_resolve_is_a_counted_failure_and_nothing_moves(tmp_path):
    audit = tmp_path / "audit"
    write_records(audit, 3)
    url = "relp://collector.invalid:2514"  # .invalid never resolves (RFC 6761)
    forwarder = Forwarder(ForwardSettings(url, None, None, None, 8192), audit)
    with pytest.raises(OSError):
        forwarder.deliver()
    assert forwarder.counters.failures == 1 and "collector.invalid" in (forwarder.counters.last_error or "")
    assert forwarder.counters.backlog_records == 3 and forwarder.counters.oldest_undelivered > 0
    assert not Cursor.load(audit, url).segments


def test_a_copy_written_with_rsyslogs_rfc_5424_template_verifies_too(tmp_path):
    """Not every collector keeps the raw message: rsyslog's RFC 5424 template (RSYSLOG_SyslogProtocol23Format)
    rebuilds each line from the parsed fields; the records in it are still the bytes vgate's log holds."""
    collector = Rsyslog(tmp_path / "collector", "relp", template="rfc5424").start()
    try:
        audit = tmp_path / "audit"
        write_records(audit, 40)
        forwarder = Forwarder(settings(collector), audit)
        forwarder.deliver()
        forwarder.close()
    finally:
        collector.kill()
    assert collected(collector) == (local_records(audit), 0)
    check = verify_forwarded(collector.out)
    assert (check.records, check.findings, check.other_lines) == (40, [], 0)


def test_a_full_decision_log_disk_stops_no_record_from_reaching_the_collector_once_there_is_room(small_disk,
                                                                                                 tmp_path):
    """The volume full: the decision log fails closed as it always has, and the forwarder's cursor
    cannot be saved, a counted failure (what the collector acknowledged stays delivered; a restart
    before the next save would send it again). Once there is room the cursor is saved and the
    collector holds every record of the log, once."""
    from webhook.core.errors import AuditError

    from helpers import fill

    collector = Rsyslog(tmp_path / "collector", "relp").start()
    try:
        audit = small_disk / "audit"
        log = write_records(audit, 20)
        forwarder = Forwarder(settings(collector), audit)
        filler = fill(small_disk)
        with pytest.raises(AuditError):
            log.record({"endpoint": "validate", "uid": "refused", "decision": "allowed"})  # fails closed, as before
        with pytest.raises(OSError):
            forwarder.deliver()  # acknowledged, but the cursor cannot be saved
        assert forwarder.counters.failures == 1 and "No space left" in (forwarder.counters.last_error or "")
        filler.unlink()
        forwarder.deliver()
        forwarder.close()
    finally:
        collector.kill()
    held, duplicates = collected(collector)
    assert held == local_records(audit) and len(held) == 20 and duplicates == 0
    assert fully_delivered(audit, collector.url) and verify_forwarded(collector.out).findings == []
