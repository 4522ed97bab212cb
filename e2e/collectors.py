"""Real collectors for the forwarding tests (the server tests', and the e2e control plane's own):
Debian's rsyslog (imrelp, plain and TLS; imtcp with the gtls driver for RFC 5425) and Debian's
syslog-ng (its syslog() source over TLS, RFC 5425), each started as a plain process writing what it
receives to a file, and the TLS material they and vgate use (made with the openssl CLI).

syslog-ng's package conflicts with rsyslog's, so it is not installed: ``.ci/run`` unpacks Debian's
``syslog-ng-core`` into ``.e2e/syslog-ng/`` (``e2e/syslog_ng.sh``) and it runs from there."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
SYSLOG_NG = Path(__file__).resolve().parent.parent / ".e2e" / "syslog-ng" / "root"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(directory: Path, addresses: tuple[str, ...] = ()) -> Path:
    """A CA, the collector's certificate (localhost, 127.0.0.1 and ``addresses``), vgate's client
    certificate, and a second CA with a certificate of the same names (what a wrong server presents)."""
    directory.mkdir(parents=True, exist_ok=True)
    served = ",".join(["DNS:localhost", "IP:127.0.0.1", *(f"IP:{address}" for address in addresses)])
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for ca in ("ca", "wrong-ca"):
        _openssl("req", "-x509", *curve, "-keyout", str(directory / f"{ca}.key"), "-out", str(directory / f"{ca}.pem"),
                 "-days", "2", "-subj", f"/CN={ca}")
    for name, ca, usage, names in (("server", "ca", "serverAuth", served),
                                   ("wrong-server", "wrong-ca", "serverAuth", served),
                                   ("client", "ca", "clientAuth", "DNS:vgate")):
        _openssl("req", *curve, "-keyout", str(directory / f"{name}.key"), "-out", str(directory / f"{name}.csr"),
                 "-subj", f"/CN={name}")
        extensions = directory / f"{name}.ext"
        extensions.write_text(f"subjectAltName={names}\nextendedKeyUsage={usage}\n")
        _openssl("x509", "-req", "-in", str(directory / f"{name}.csr"), "-CA", str(directory / f"{ca}.pem"),
                 "-CAkey", str(directory / f"{ca}.key"), "-CAcreateserial", "-out", str(directory / f"{name}.pem"),
                 "-days", "2", "-extfile", str(extensions))
    return directory


class Rsyslog:
    """One rsyslogd receiving on a free port (``kind``: relp, relp+tls, syslog+tls) and writing each
    message as received (``%rawmsg%``) to ``out``, synchronously: the ruleset's queue is direct and
    the file flushed at each transaction's end, so what it acknowledges is in the file."""

    def __init__(self, workdir: Path, kind: str, pki: Path | None = None, server: str = "server",
                 template: str = "raw") -> None:
        self.workdir, self.kind, self.pki, self.server = workdir, kind, pki, server
        self.template = template  # raw (%rawmsg%) or rsyslog's RFC 5424 one, RSYSLOG_SyslogProtocol23Format
        self.port = free_port()
        self.out = workdir / "collected.log"
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "work").mkdir(exist_ok=True)

    @property
    def url(self) -> str:
        return f"{self.kind}://localhost:{self.port}"

    def config_text(self) -> str:
        """rsyslog's configuration for this collector (RainerScript)."""
        pki = self.pki
        lines = [f'global(workDirectory="{self.workdir / "work"}" maxMessageSize="64k"'
                 + (f' defaultNetstreamDriverCAFile="{pki / "ca.pem"}"'
                    f' defaultNetstreamDriverCertFile="{pki / (self.server + ".pem")}"'
                    f' defaultNetstreamDriverKeyFile="{pki / (self.server + ".key")}"'
                    if self.kind == "syslog+tls" and pki else "") + ")",
                 'template(name="raw" type="string" string="%rawmsg%\\n")',
                 'ruleset(name="collect" queue.type="Direct") {',
                 f'  action(type="omfile" file="{self.out}" flushOnTXEnd="on" asyncWriting="off" template="'
                 + ("raw" if self.template == "raw" else "RSYSLOG_SyslogProtocol23Format") + '")',
                 "}"]
        if self.kind == "relp":
            lines += ['module(load="imrelp")', f'input(type="imrelp" port="{self.port}" ruleset="collect")']
        elif self.kind == "relp+tls":
            assert pki is not None
            lines += ['module(load="imrelp")',
                      f'input(type="imrelp" port="{self.port}" ruleset="collect" tls="on" '
                      f'tls.caCert="{pki / "ca.pem"}" tls.myCert="{pki / (self.server + ".pem")}" '
                      f'tls.myPrivKey="{pki / (self.server + ".key")}" tls.authMode="name" '
                      'tls.permittedPeer=["client"])']
        else:
            lines += ['module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" '
                      'streamDriver.authMode="x509/certvalid")',
                      f'input(type="imtcp" port="{self.port}" ruleset="collect")']
        return "\n".join(lines) + "\n"

    def start(self) -> Rsyslog:
        config = self.workdir / "rsyslog.conf"
        config.write_text(self.config_text())
        log = open(self.workdir / "rsyslogd.log", "ab")  # noqa: SIM115 - the daemon's output, kept for failures
        self.process = subprocess.Popen([RSYSLOGD, "-n", "-f", str(config), "-i", str(self.workdir / "pid")],
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_listening()
        return self

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"the collector did not listen on {self.port}: {self.log()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, sig)
            self.process.wait(timeout=20)
        (self.workdir / "pid").unlink(missing_ok=True)

    def log(self) -> str:
        path = self.workdir / "rsyslogd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def lines(self) -> list[bytes]:
        return self.out.read_bytes().splitlines() if self.out.exists() else []


class SyslogNg(Rsyslog):
    """syslog-ng receiving RFC 5425 (``syslog(transport("tls"))``, the peer's certificate required)
    and writing each message as received (``${RAWMSG}``, ``flags(store-raw-message)``)."""

    def __init__(self, workdir: Path, pki: Path) -> None:
        super().__init__(workdir, "syslog+tls", pki)

    def config_text(self) -> str:
        pki = self.pki
        assert pki is not None
        return (f"@version: 3.38\noptions {{ keep-hostname(yes); }};\n"
                f'source s_vgate {{ syslog(ip("127.0.0.1") port({self.port}) transport("tls") '
                f"flags(store-raw-message) tls(key-file(\"{pki / 'server.key'}\") cert-file(\"{pki / 'server.pem'}\") "
                f"ca-file(\"{pki / 'ca.pem'}\") peer-verify(required-trusted))); }};\n"
                f'destination d_file {{ file("{self.out}" template("${{RAWMSG}}\\n")); }};\n'
                "log { source(s_vgate); destination(d_file); flags(flow-control); };\n")

    def start(self) -> SyslogNg:
        binary = SYSLOG_NG / "usr" / "sbin" / "syslog-ng"
        if not binary.exists():
            raise RuntimeError(f"{binary} is missing: run e2e/syslog_ng.sh (what .ci/run does) to unpack Debian's "
                               "syslog-ng-core there")
        config = self.workdir / "syslog-ng.conf"
        config.write_text(self.config_text())
        log = open(self.workdir / "rsyslogd.log", "ab")  # noqa: SIM115 - the daemon's output, kept for failures
        libraries = SYSLOG_NG / "usr" / "lib" / "syslog-ng"
        self.process = subprocess.Popen(
            [str(binary), "-F", "-f", str(config), f"--module-path={libraries / '3.38'}",
             "-R", str(self.workdir / "persist"), "-p", str(self.workdir / "pid"), "-c", str(self.workdir / "ctl")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "LD_LIBRARY_PATH": str(libraries)})
        self._wait_listening()
        return self


Records = dict[tuple[str, int], str]  # (segment, line number) -> sha256 of the record's line


def local_records(audit: Path) -> Records:
    """Every record the local decision log holds."""
    held = {}
    for segment in sorted(audit.glob("decisions-*.jsonl")):
        for number, line in enumerate(segment.read_bytes().splitlines(), start=1):
            held[(segment.name, number)] = hashlib.sha256(line).hexdigest()
    return held


def collected_records(lines: list[bytes]) -> tuple[Records, int, list[bytes]]:
    """What a collector's lines hold of the log (each record's first copy), how many copies were
    byte-identical duplicates, and the lines that are no record or differ from their first copy."""
    from webhook.forward.message import parse

    held: Records = {}
    duplicates, strays = 0, []
    for raw in lines:
        message = parse(raw)
        if message is None or message.place is None:
            strays.append(raw)
            continue
        digest = hashlib.sha256(message.msg).hexdigest()
        first = held.get(message.place)
        if first is None:
            held[message.place] = digest
        elif first == digest:
            duplicates += 1
        else:
            strays.append(raw)
    return held, duplicates, strays
