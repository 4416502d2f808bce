import sys

from modeldrain.hook.cli import main

sys.exit(main())
