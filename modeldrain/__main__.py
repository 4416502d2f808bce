import sys

from modeldrain.tools import main

sys.exit(main())
