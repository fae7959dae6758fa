"""`python -m catalog.cli …`: the `floe` command (how `floe up` and the tests start `floe serve`)."""

from catalog.cli import main

main()
