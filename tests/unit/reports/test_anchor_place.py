"""Where the report writer may keep its anchor (issue 36, item 6): never inside the directory that holds
the evidence on the same mount, anywhere on a mount of its own. The mounts are read from a mountinfo
file written like the kernel's (a space in a mount point is \\040)."""

from __future__ import annotations

from pathlib import Path

from webhook.reports.anchor_place import misplaced, mount_points

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 8:2 /volumes/evidence /srv/vgate/audit rw,relatime - ext4 /dev/sdb1 rw
31 22 8:2 /volumes/anchor /srv/vgate/anchor rw,relatime - ext4 /dev/sdb1 rw
32 22 0:40 / /mnt/writer\\040state rw - tmpfs tmpfs rw
"""


def points(tmp_path: Path) -> list[Path]:
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    return mount_points(tmp_path / "mountinfo")


def test_mount_points_are_read_with_their_escapes(tmp_path: Path) -> None:
    assert points(tmp_path) == [Path("/"), Path("/mnt/writer state"), Path("/srv/vgate/anchor"),
                                Path("/srv/vgate/audit")]


def test_an_anchor_inside_the_directory_holding_the_evidence_on_the_same_mount_is_refused(tmp_path: Path) -> None:
    evidence = {"audit.dir": Path("/work/run/audit"), "reports.dir": Path("/work/run/reports")}
    for inside in ("/work/run/anchor/a.jsonl", "/work/run/a.jsonl", "/work/run/audit/a.jsonl",
                   "/work/run/reports/x/a.jsonl"):
        reason = misplaced(Path(inside), evidence, points(tmp_path))
        assert reason is not None and "inside /work/run, which holds audit.dir" in reason, inside


def test_the_reports_directory_counts_as_evidence_too(tmp_path: Path) -> None:
    evidence = {"audit.dir": Path("/srv/vgate/audit"), "reports.dir": Path("/data/reports")}
    reason = misplaced(Path("/data/anchor/a.jsonl"), evidence, points(tmp_path))
    assert reason is not None and "which holds reports.dir (/data/reports)" in reason


def test_an_anchor_on_a_mount_of_its_own_or_outside_is_kept(tmp_path: Path) -> None:
    """The chart's layout (each volume its own mount, bind mounts of one disk included), and the default
    outside the chart (the writer's state directory, not under the directory it runs in)."""
    chart = {"audit.dir": Path("/srv/vgate/audit"), "reports.dir": Path("/srv/vgate/audit/reports")}
    assert misplaced(Path("/srv/vgate/anchor/a.jsonl"), chart, points(tmp_path)) is None
    assert misplaced(Path("/mnt/writer state/a.jsonl"), chart, points(tmp_path)) is None
    cwd = {"audit.dir": Path("/work/run/audit"), "reports.dir": Path("/work/run/reports")}
    assert misplaced(Path("/root/.local/state/vgate/a.jsonl"), cwd, points(tmp_path)) is None


def test_a_mount_of_the_evidence_does_not_free_the_directory_holding_it(tmp_path: Path) -> None:
    """The audit volume mounted at /srv/vgate/audit: an anchor in /srv/vgate itself is on the root
    mount, out of that volume; one inside the volume is not."""
    chart = {"audit.dir": Path("/srv/vgate/audit"), "reports.dir": Path("/srv/vgate/audit/reports")}
    assert misplaced(Path("/srv/vgate/a.jsonl"), chart, points(tmp_path)) is None
    reason = misplaced(Path("/srv/vgate/audit/anchor/a.jsonl"), chart, points(tmp_path))
    assert reason is not None and "which holds audit.dir" in reason
