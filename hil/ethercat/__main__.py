import sys

from .emulator import main

sys.exit(main())
