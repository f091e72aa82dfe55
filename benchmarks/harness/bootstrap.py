"""Bootstrap intervals over groups (issue 35): a figure averaged over cases is resampled by the
groups the cases fall in (a conversation, a LongMemEval question), so its interval says how far
it would move on other conversations of the same kind, not on other questions of these."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

RESAMPLES = 2000
SEED = 35


def interval(
    values: Sequence[float], groups: Sequence[Hashable], *, level: float = 0.95
) -> tuple[float, float, float]:
    """The mean of `values` and its bootstrap `level` interval, resampling whole groups (each
    value's group is `groups`' entry at the same place)."""
    keys = sorted(set(groups), key=str)
    index = {k: i for i, k in enumerate(keys)}
    sums = np.zeros(len(keys))
    counts = np.zeros(len(keys))
    for v, g in zip(values, groups, strict=True):
        sums[index[g]] += v
        counts[index[g]] += 1
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(keys), size=(RESAMPLES, len(keys)))
    means = sums[picks].sum(axis=1) / np.maximum(counts[picks].sum(axis=1), 1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return float(sums.sum() / max(counts.sum(), 1)), float(lo), float(hi)


def shown(values: Sequence[float], groups: Sequence[Hashable], scale: float = 100.0) -> str:
    """'mean [lo, hi]' of `values` times `scale` (percent by default)."""
    mean, lo, hi = interval(values, groups)
    return f"{scale * mean:.1f} [{scale * lo:.1f}, {scale * hi:.1f}]"
