"""Bootstrap intervals over groups (issue 35): a figure averaged over cases is resampled by the
groups the cases fall in (a conversation, a LongMemEval question), so its interval says how far
it would move on other conversations of the same kind, not on other questions of these. With
`within`, each group drawn has its cases drawn again (users, then facts within each user drawn):
the interval then also says how far the figure moves on other cases of these groups' kind."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

RESAMPLES = 2000
SEED = 35


def interval(
    values: Sequence[float],
    groups: Sequence[Hashable],
    *,
    level: float = 0.95,
    within: bool = False,
) -> tuple[float, float, float]:
    """The mean of `values` and its bootstrap `level` interval, resampling whole groups (each
    value's group is `groups`' entry at the same place); with `within`, each group drawn then
    has its values drawn again, as many as it holds (a two-stage bootstrap)."""
    keys = sorted(set(groups), key=str)
    index = {k: i for i, k in enumerate(keys)}
    sums = np.zeros(len(keys))
    counts = np.zeros(len(keys))
    for v, g in zip(values, groups, strict=True):
        sums[index[g]] += v
        counts[index[g]] += 1
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(keys), size=(RESAMPLES, len(keys)))
    if within:
        totals = _drawn_within(values, [index[g] for g in groups], counts, picks, rng)
    else:
        totals = sums[picks].sum(axis=1)
    means = totals / np.maximum(counts[picks].sum(axis=1), 1)
    tail = (1 - level) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return float(sums.sum() / max(counts.sum(), 1)), float(lo), float(hi)


def _drawn_within(
    values: Sequence[float],
    where: Sequence[int],
    counts: np.ndarray,
    picks: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Each resample's sum when every group it picks (`picks`, by number) has its values
    (`values`, in group `where`) drawn again with replacement, as many as it holds."""
    size = int(counts.max()) if len(counts) else 0
    held = np.zeros((len(counts), size))
    filled = np.zeros(len(counts), dtype=int)
    for v, g in zip(values, where, strict=True):
        held[g, filled[g]] = v
        filled[g] += 1
    totals = np.zeros(picks.shape[0])
    for slot in picks.T:  # one group a resample at a time
        n = counts[slot][:, None]
        drawn = np.floor(rng.random((len(slot), size)) * n).astype(int)
        taken = held[slot[:, None], drawn]
        totals += np.where(np.arange(size) < n, taken, 0.0).sum(axis=1)
    return totals


def shown(
    values: Sequence[float],
    groups: Sequence[Hashable],
    scale: float = 100.0,
    *,
    within: bool = False,
) -> str:
    """'mean [lo, hi]' of `values` times `scale` (percent by default); `within` as for
    `interval`."""
    mean, lo, hi = interval(values, groups, within=within)
    return f"{scale * mean:.1f} [{scale * lo:.1f}, {scale * hi:.1f}]"


def percentile_ratio(
    mine: Sequence[float],
    theirs: Sequence[float],
    groups: Sequence[Hashable],
    q: float = 95.0,
    *,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """The ratio of `mine`'s `q`-th percentile to `theirs'` and its bootstrap `level` interval:
    paired, the two systems' calls at one place asking the same question (`groups`' entry
    there), whole questions resampled with every call of theirs (issue 56: a p95 of about a
    hundred questions moves by several percent from one run to the next)."""
    a, b = np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    keys = sorted(set(groups), key=str)
    places: dict[Hashable, list[int]] = {k: [] for k in keys}
    for n, g in enumerate(groups):
        places[g].append(n)
    members = [np.asarray(places[k]) for k in keys]
    rng = np.random.default_rng(SEED)
    ratios = np.empty(RESAMPLES)
    for r in range(RESAMPLES):
        drawn = np.concatenate([members[i] for i in rng.integers(0, len(keys), len(keys))])
        ratios[r] = np.percentile(a[drawn], q) / np.percentile(b[drawn], q)
    tail = (1 - level) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    return float(np.percentile(a, q) / np.percentile(b, q)), float(lo), float(hi)
