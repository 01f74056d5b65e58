"""``python -m fitrules``: the same as the ``fitrules`` command."""

import sys

from fitrules.cli import main

if __name__ == "__main__":
    sys.exit(main())
