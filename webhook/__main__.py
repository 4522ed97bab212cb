"""``python -m webhook`` is the ``vgate`` command."""

from .cli import main

main()
