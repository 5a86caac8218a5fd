"""``python -m crawler.cli``: the ``neardup`` command."""

import sys

from crawler.cli import main

sys.exit(main())
