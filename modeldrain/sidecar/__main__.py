import sys

from modeldrain.sidecar.main import main

__all__ = []

sys.exit(main())
