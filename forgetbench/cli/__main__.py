"""``python -m forgetbench.cli``: the same as the ``forgetbench`` command."""

import sys

from forgetbench.cli import main

sys.exit(main())
