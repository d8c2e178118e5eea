"""Pause Python's cyclic garbage collector around allocation-heavy construction.

Parsing a large regex and building its automaton allocate hundreds of
thousands of small tuples and no reference cycles. Each allocation burst can
trigger a full collection that walks every object of the process (torch and
transformers hold millions), which cost 100+ ms per construction for a
Kubernetes-sized JSON Schema. Reference counting still frees everything.

>>> with gc_paused():
...     xs = [(i, i) for i in range(10)]
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Disable the cyclic collector inside the block (re-entrant, restores the previous setting)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
