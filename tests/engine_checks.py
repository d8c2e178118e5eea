"""Checks that hold for any ``Constraint`` engine, shared by the regex and grammar tests."""

from __future__ import annotations

import threading

import numpy as np


def in_threads(worker, threads: int) -> None:
    """Run ``worker(i)`` for ``i`` in ``range(threads)`` on as many threads; wait for all."""
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def grow_from_threads(make, *, threads: int = 8, walks: int = 6, steps: int = 12):
    """Threads walk random allowed tokens on one fresh engine from ``make()`` at once (so its
    states and masks are created concurrently); every mask they saw must equal the one a
    second engine, grown alone, gives for the same tokens. Returns the shared engine."""
    shared = make()
    seen, errors = {}, []
    barrier = threading.Barrier(threads)

    def worker(i):
        try:
            rng = np.random.default_rng(i)
            barrier.wait()
            for w in range(walks):
                q, toks, masks = shared.starts.copy(), [], []
                for _ in range(steps):
                    allowed = shared.allowed_ids(int(q[0]))
                    masks.append(allowed)
                    live = allowed[~np.isin(allowed, shared.eos_token_ids)]
                    if not len(live):
                        break
                    t = int(rng.choice(live))
                    toks.append(t)
                    q = shared.advance(q, np.array([t]))
                seen[(i, w)] = (toks, masks)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))
            barrier.abort()

    in_threads(worker, threads)
    assert not errors, errors[:3]
    assert len(seen) == threads * walks
    alone = make()
    for toks, masks in seen.values():
        q = alone.starts.copy()
        for j, want in enumerate(masks):
            assert np.array_equal(alone.allowed_ids(int(q[0])), want)
            if j < len(toks):
                q = alone.advance(q, np.array([toks[j]]))
    return shared
