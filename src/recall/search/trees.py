"""Gradient-boosted trees evaluated in numpy from package data (decision 0027).

A fitted ensemble (`benchmarks/fit_second_stage.py` fits it with scikit-learn, which the package
does not need at run time) is stored as complete binary trees of one depth: a leaf above that
depth is padded with splits that always go left to copies of itself, so every row of every tree
takes exactly `depth` steps and all trees are walked at once, a step at a time, as array
lookups. A split sends a row left when its feature is at most the threshold.

Each node also keeps the mean value of the leaves below it, weighted by the training rows that
reached them, so a row's logit splits into its features' parts (`contributions`): along its path
in each tree, the change of that mean at a split goes to the split's feature (Saabas's method).
The parts and the `bias` (the trees' root means and the baseline) add up to the logit.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recall.errors import ConfigError

__all__ = ["TreeModel"]


@dataclass(frozen=True, slots=True)
class TreeModel:
    """Boosted regression trees over `features`, giving a logit: `baseline` plus each tree's
    leaf value.

    Attributes:
        features: the input columns, in order.
        baseline: the logit before any tree.
        depth: every tree's depth (leaves sit at `depth`).
        feature: (trees, 2**depth - 1) the column each split reads.
        threshold: (trees, 2**depth - 1) a row goes left when its value is at most this.
        value: (trees, 2**(depth + 1) - 1) each node's mean leaf value, internal nodes
            included (leaves are the last 2**depth).
    """

    features: tuple[str, ...]
    baseline: float
    depth: int
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray

    def _leaves(self, x: np.ndarray, path: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each row's leaf in each tree after `depth` steps (its index in the tree), and, with
        `path`, the nodes on the way. The arrays are read flat with `take` (a tree's nodes at
        its offset, a row's values at its): the same lookups as two-dimensional indexing,
        about three times faster; a node is walked as its flat index, `2 * node + 1 + right`
        within its tree."""
        trees, inner = self.feature.shape
        offset = np.arange(trees, dtype=np.intp) * inner
        step = 1 - offset  # a child's flat index: 2 * parent + step (+ 1 to go right)
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        values = x.ravel()
        row = (np.arange(len(x), dtype=np.intp) * x.shape[1])[:, None]
        node = np.repeat(offset[None, :], len(x), axis=0)
        walked = [node - offset] if path else []
        for _ in range(self.depth):
            right = values.take(row + feature.take(node)) > threshold.take(node)
            node *= 2
            node += step
            node += right
            if path:
                walked.append(node - offset)
        return node - offset, walked

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The logit of each row of `x` (columns in `features`' order)."""
        if len(x) == 0:
            return np.zeros(0)
        leaves, _path = self._leaves(x)
        trees, nodes = self.value.shape
        picked = self.value.ravel().take(leaves + np.arange(trees) * nodes)
        out: np.ndarray = self.baseline + picked.sum(axis=1)
        return out

    def contributions(self, row: np.ndarray) -> dict[str, float]:
        """Each feature's part of one row's logit; `bias` (the baseline and the trees' root
        means) is the rest, and together they add up to it."""
        _leaves, path = self._leaves(row[None, :], path=True)
        tree = np.arange(self.feature.shape[0])
        parts = np.zeros(len(self.features))
        for parent, child in itertools.pairwise(path):
            change = self.value[tree, child[0]] - self.value[tree, parent[0]]
            np.add.at(parts, self.feature[tree, parent[0]], change)
        out = dict(zip(self.features, (float(p) for p in parts), strict=True))
        out["bias"] = self.baseline + float(self.value[:, 0].sum())
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], names: Sequence[str]) -> TreeModel:
        """Read an ensemble, checking that it is over `names`, in that order.

        Raises:
            ConfigError: the data is not such an ensemble.
        """
        features = tuple(data["features"])
        if features != tuple(names):
            raise ConfigError(f"tree model over {features}, expected {tuple(names)}")
        depth = int(data["depth"])
        feature = np.asarray(data["feature"], dtype=np.intp)
        threshold = np.asarray(data["threshold"], dtype=np.float64)
        value = np.asarray(data["value"], dtype=np.float64)
        trees = feature.shape[0] if feature.ndim == 2 else -1
        if (
            depth < 1
            or trees < 1
            or feature.shape != (trees, 2**depth - 1)
            or threshold.shape != feature.shape
            or value.shape != (trees, 2 ** (depth + 1) - 1)
            or feature.min() < 0
            or feature.max() >= len(names)
            or not np.isfinite(value).all()
        ):
            raise ConfigError("tree model arrays do not match its features and depth")
        return cls(features, float(data["baseline"]), depth, feature, threshold, value)

    def to_json(self) -> dict[str, Any]:
        """The ensemble as JSON data (`from_json` reads it back)."""
        return {
            "kind": "trees",
            "features": list(self.features),
            "baseline": self.baseline,
            "depth": self.depth,
            "feature": self.feature.tolist(),
            # +inf (a padding split that always goes left) is not JSON: the largest float is
            "threshold": np.minimum(self.threshold, np.finfo(np.float64).max).tolist(),
            "value": self.value.tolist(),
        }
