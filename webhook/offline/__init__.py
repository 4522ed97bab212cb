"""The offline commands: ``vgate eval`` (with its model of the admission chain) and ``vgate test``."""
