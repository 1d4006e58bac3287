"""`python -m rlprobe` runs the CLI."""

from rlprobe.cli import main

main()
