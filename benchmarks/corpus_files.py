"""The JSONSchemaBench corpus as the benchmarks read it: its location, its datasets, and the
round-robin order (one file of each dataset in turn, each dataset's files sorted) that
``step_latency.py``, ``first_mask.py`` and ``regex_digests.py`` draw their schemas in, so that
their first N schemas are the same ones.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> for d, names in (("Snowplow", "ab"), ("Kubernetes", "xyz")):
...     (root / d).mkdir()
...     for c in names:
...         _ = (root / d / f"{c}.json").write_text("{}")
>>> [f"{p.parent.name}/{p.stem}" for p in round_robin(root)]
['Kubernetes/x', 'Snowplow/a', 'Kubernetes/y', 'Snowplow/b', 'Kubernetes/z']
"""

from __future__ import annotations

import signal
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "data" / "jsonschemabench"
DATASETS = ["Github_trivial", "Github_easy", "Github_medium", "Github_hard", "Glaiveai2K",
            "Kubernetes", "Snowplow", "WashingtonPost"]


def round_robin(root: Path = CORPUS, hint: str = " (JSONSchemaBench's data/ folders; see --corpus)"):
    """The corpus files, one of each dataset in turn (a generator); exits with a message
    naming ``root`` when it holds none of the datasets."""
    files = {d: sorted((root / d).glob("*.json")) for d in DATASETS if (root / d).is_dir()}
    if not files:
        raise SystemExit(f"no corpus at {root}{hint}")
    for i in range(max(len(f) for f in files.values())):
        for d in files:
            if i < len(files[d]):
                yield files[d][i]


class Timeout(Exception):
    """Raised by SIGALRM once :func:`install_alarm` has run (``signal.alarm(seconds)``)."""


def _alarm(_sig, _frame):
    raise Timeout()


def install_alarm() -> None:
    """Make ``signal.alarm`` raise :class:`Timeout` (a conversion that runs too long is skipped)."""
    signal.signal(signal.SIGALRM, _alarm)
