"""drain-sidecar's entry point: `drain-sidecar retirement ...` runs the reference client; anything else serves.

The dispatch comes before the server's imports, so the retirement command runs without aiohttp or
uvloop (a controller's or an operator's machine need not have them).
"""

from __future__ import annotations

import sys

RETIREMENT = "retirement"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [RETIREMENT]:
        from sidecar import retirement_cli

        return retirement_cli.main(args[1:])
    from sidecar import cli

    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
