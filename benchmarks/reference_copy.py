"""Another copy of the package, importable as ``hfc_ref`` next to this checkout's
``hf_constrained``, for the same-process A/B scripts (``first_mask_ab.py``,
``first_visit_ab.py``, ``automaton_ab.py``)."""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path


def import_reference(package_dir: Path, module: str = "hfc_ref"):
    """Link ``package_dir`` (another checkout's ``hf_constrained`` folder) as ``hfc_ref`` in a
    fresh temporary folder put first on ``sys.path``, and import ``module`` from it."""
    link_dir = Path(tempfile.mkdtemp(prefix="hfc_ref_"))
    (link_dir / "hfc_ref").symlink_to(Path(package_dir).resolve(), target_is_directory=True)
    sys.path.insert(0, str(link_dir))
    return importlib.import_module(module)
