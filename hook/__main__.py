import sys

from hook.cli import main

sys.exit(main())
