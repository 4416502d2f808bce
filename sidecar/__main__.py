import sys

from sidecar.launch import main

sys.exit(main())
