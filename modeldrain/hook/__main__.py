import sys

from modeldrain.hook.cli import main

__all__ = []

sys.exit(main())
