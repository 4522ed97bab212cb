"""Straight to the audit system: the decision log delivered to a syslog or RELP collector (issue 37)."""
