"""The MLPS 2.0 (等保2.0) control points vgate's rules serve, as GB/T 22239-2019 names them.

Level-3 general requirements (8.1): 8.1.3 安全区域边界 (security area boundary) and 8.1.4 安全计算
环境 (security computing environment), numbered in the standard's order. A rule's METADATA names
its control as ``MLPS 2.0 (GB/T 22239-2019) <number> <English name>``; a test holds every rule to
this table, and reports print the Chinese name beside it for assessors.
"""

from __future__ import annotations

import re

PREFIX = "MLPS 2.0 (GB/T 22239-2019) "
UNMAPPED = "(no GB/T 22239-2019 control point: availability; GB/T 22239-2008 7.1.3.7 resource control)"
CONTROL_POINTS: dict[str, tuple[str, str]] = {
    "8.1.3.1": ("边界防护", "boundary protection"),
    "8.1.3.2": ("访问控制", "access control"),
    "8.1.3.3": ("入侵防范", "intrusion prevention"),
    "8.1.3.4": ("恶意代码和垃圾邮件防范", "malicious code and spam prevention"),
    "8.1.3.5": ("安全审计", "security audit"),
    "8.1.3.6": ("可信验证", "trusted verification"),
    "8.1.4.1": ("身份鉴别", "identification and authentication"),
    "8.1.4.2": ("访问控制", "access control"),
    "8.1.4.3": ("安全审计", "security audit"),
    "8.1.4.4": ("入侵防范", "intrusion prevention"),
    "8.1.4.5": ("恶意代码防范", "malicious code prevention"),
    "8.1.4.6": ("可信验证", "trusted verification"),
    "8.1.4.7": ("数据完整性", "data integrity"),
    "8.1.4.8": ("数据保密性", "data confidentiality"),
    "8.1.4.9": ("数据备份恢复", "data backup and recovery"),
    "8.1.4.10": ("剩余信息保护", "residual information protection"),
    "8.1.4.11": ("个人信息保护", "personal information protection"),
}
SECTIONS = {"8.1.3": ("安全区域边界", "security area boundary"),
            "8.1.4": ("安全计算环境", "security computing environment")}
_CONTROL = re.compile(r"^MLPS 2\.0 \(GB/T 22239-2019\) (?P<number>8\.1\.\d\.\d+) (?P<name>.+)$")


def chinese_name(control: str) -> str | None:
    """``安全计算环境 / 访问控制`` for ``MLPS 2.0 (GB/T 22239-2019) 8.1.4.2 access control``."""
    match = _CONTROL.match(control)
    if not match or match["number"] not in CONTROL_POINTS:
        return None
    section = SECTIONS[match["number"].rsplit(".", 1)[0]][0]
    return f"{section} / {CONTROL_POINTS[match['number']][0]}"


def is_valid(control: str) -> bool:
    """A control string names a real control point by its number and English name, or says it has none."""
    if control == UNMAPPED:
        return True
    match = _CONTROL.match(control)
    return match is not None and CONTROL_POINTS.get(match["number"], ("", ""))[1] == match["name"]
