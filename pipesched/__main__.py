import sys

from pipesched.cli import main

sys.exit(main())
