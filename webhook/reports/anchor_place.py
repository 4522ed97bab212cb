"""Where the anchor may be kept: never where whoever writes the evidence can write it too.

The anchor proves which reports were signed only against someone who cannot rewrite it. An insider
who can write the directory that holds ``audit.dir`` (or ``reports.dir``) can rename, replace or cut
anything under it, so an anchor kept there (the old default, ``anchor/`` beside ``audit/``,
``reports/`` and ``keys/``) protects nothing against them. The writer therefore refuses an anchor
inside that directory when it is on the same mount as the evidence; a mount of its own (the chart's
anchor volume, which only the writer's pod mounts) is out of reach of whoever writes the evidence
volume, wherever it is mounted. Outside the chart the default is the writer's own state directory,
``~/.local/state/vgate/`` (created 0700), which is not under the directory it is started in unless
that is the home directory itself.

Mounts are read from ``/proc/self/mountinfo``, so a bind mount of the same filesystem (a
Kubernetes ``subPath``, a podman volume) counts as a mount of its own, as it is one for a writer in
that mount namespace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..core.config import Config
from ..core.errors import ConfigError

MOUNTINFO = Path("/proc/self/mountinfo")
_ESCAPED = re.compile(r"\\([0-7]{3})")  # mountinfo writes a space as \040


def mount_points(mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Every mount point this process sees (its fifth field of mountinfo), ``/`` when it cannot tell."""
    try:
        text = mountinfo.read_text()
    except OSError:
        return [Path("/")]
    points = {Path(_ESCAPED.sub(lambda octal: chr(int(octal[1], 8)), line.split()[4]))
              for line in text.splitlines() if len(line.split()) > 4}
    return sorted(points | {Path("/")})


def mount_of(path: Path, points: Iterable[Path]) -> Path:
    """The mount ``path`` (absolute, resolved) is on: the longest mount point it lies under."""
    return max((point for point in points if path.is_relative_to(point)), key=lambda point: len(point.parts))


def misplaced(anchor: Path, evidence: dict[str, Path], points: Iterable[Path]) -> str | None:
    """Why the anchor cannot be kept at ``anchor``, or None when it can.

    ``evidence`` names each directory the insider may write (``audit.dir``, ``reports.dir``).
    """
    points = list(points)
    place = Path(os.path.realpath(anchor.parent))
    for key, directory in evidence.items():
        resolved = Path(os.path.realpath(directory))
        holder = resolved.parent
        if place.is_relative_to(holder) and mount_of(place, points) == mount_of(resolved, points):
            return (f"reports.anchorFile {anchor} is inside {holder}, which holds {key} ({directory}), on the same "
                    "mount: whoever can write the evidence could rewrite the anchor too. Keep the anchor on a "
                    "volume of its own, or outside that directory (the default is ~/.local/state/vgate/); "
                    "see docs/operators.md, Deploying, The anchor")
    return None


def anchor_path(config: Config) -> Path | None:
    """The anchor the config names (``~`` expanded), or None; ConfigError if it sits with the evidence."""
    named = config.reports.anchor_file
    if not named:
        return None
    anchor = Path(os.path.expanduser(named))
    reason = misplaced(anchor, {"audit.dir": Path(config.audit.dir), "reports.dir": Path(config.reports.dir)},
                       mount_points())
    if reason:
        raise ConfigError(config.source, None, reason)
    return anchor
