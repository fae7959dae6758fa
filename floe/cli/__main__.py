"""`python -m floe.cli …`: the `floe` command (how `floe up` and the tests start `floe serve`)."""

from floe.cli import main

main()
