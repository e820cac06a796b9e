"""`python -m band_trio` is the `band-trio` command."""

import sys

from .cli import main

sys.exit(main())
