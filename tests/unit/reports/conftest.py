"""The signed history of test_insider, shared with the other insider tests (test_hostile_volume)."""

from test_insider import history, signed_history  # noqa: F401 - fixtures
