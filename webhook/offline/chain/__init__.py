"""A model of the admission chain a real API server runs before and around vgate (``vgate eval``)."""
