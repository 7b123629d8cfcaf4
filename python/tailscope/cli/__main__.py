"""`python -m tailscope.cli`: the tailscope command."""

from tailscope.cli import main

main()
