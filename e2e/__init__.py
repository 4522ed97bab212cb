"""A real local control plane for vgate's end-to-end tests: built from Go modules, run on loopback."""
