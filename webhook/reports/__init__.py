"""Hourly compliance reports: built from the decision log, rendered per format, signed, verified, scheduled."""
