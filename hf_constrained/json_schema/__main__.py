"""``python -m hf_constrained.json_schema``: convert a schema file or print the suite table."""

import sys

from .suite import main

sys.exit(main())
