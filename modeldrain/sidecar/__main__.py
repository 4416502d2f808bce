import sys

from modeldrain.sidecar.main import main

sys.exit(main())
