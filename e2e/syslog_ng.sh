#!/usr/bin/env bash
# Debian's syslog-ng, unpacked into .e2e/syslog-ng/root for the forwarding tests (a second RFC 5425
# receiver beside rsyslog). Its package conflicts with rsyslog's, so it is not installed: its
# libraries' dependencies are, and the package itself is downloaded and unpacked. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
target=.e2e/syslog-ng
[ -x "$target/root/usr/sbin/syslog-ng" ] && exit 0
deps="libivykis0 libnet1 libjson-c5 libwrap0 libglib2.0-0 libcap2 libpcre3 libssl3"
if ! dpkg -s $deps >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $deps >/dev/null
fi
mkdir -p "$target"
chmod 0777 "$target"  # apt downloads as the _apt user
(cd "$target" && apt-get download -qq syslog-ng-core 2>/dev/null || { apt-get update -qq && apt-get download -qq syslog-ng-core; })
dpkg-deb -x "$target"/syslog-ng-core_*.deb "$target/root"
"$target/root/usr/sbin/syslog-ng" --version >/dev/null 2>&1 || LD_LIBRARY_PATH="$target/root/usr/lib/syslog-ng" "$target/root/usr/sbin/syslog-ng" --version | head -1
