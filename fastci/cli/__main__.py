"""``python -m fastci.cli``: the ``fastci`` command."""

import sys

from fastci.cli.main import main

sys.exit(main())
