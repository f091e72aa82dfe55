"""A logistic model on standardised features: the second stage's linear ranker, gate or
intent (`recall.search.second_stage`); its trees are `recall.search.trees`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recall.errors import ConfigError

__all__ = ["LinearModel"]


@dataclass(frozen=True, slots=True)
class LinearModel:
    """A logistic model on standardised features: `intercept + sum(w * (x - mean) / scale)`."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The logit of each row of `x`."""
        if len(x) == 0:
            return np.zeros(0)
        out: np.ndarray = self.intercept + ((x - self.mean) / self.scale) @ self.weights
        return out

    def contributions(self, row: np.ndarray) -> dict[str, float]:
        """Each feature's part of one row's logit (they add up to it, with the intercept)."""
        parts = (row - self.mean) / self.scale * self.weights
        return dict(zip(self.features, (float(p) for p in parts), strict=True))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], names: Sequence[str]) -> LinearModel:
        """Read a model, checking that it is over `names`, in that order.

        Raises:
            ConfigError: the model is over other features or its arrays disagree.
        """
        features = tuple(data["features"])
        if features != tuple(names):
            raise ConfigError(f"second-stage model over {features}, expected {tuple(names)}")
        arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
        if any(a.shape != (len(names),) for a in arrays) or np.any(arrays[1] <= 0):
            raise ConfigError("second-stage model arrays do not match its features")
        return cls(features, arrays[0], arrays[1], arrays[2], float(data["intercept"]))

    def to_json(self) -> dict[str, Any]:
        """The model as JSON data (`from_json` reads it back)."""
        return {
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "intercept": self.intercept,
        }
