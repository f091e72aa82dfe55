"""Does the message ask about the user's own life or about earlier talk? The intent that a turn's
gate weighs with the match (decision 0039).

A logistic regression over the message's vector and a few words of its own (the first person,
"you said", "last time", a question mark), fitted by `python benchmarks/fit_intent.py` on
small talk, generic requests and personal questions written for it and on the fit part of the
benchmarks' messages, and shipped in the second stage's file (`"asking"`). Its logit, offset
included, is the `intent` a turn's gate reads; the gate model's own feature of that name is the
older intent model of decision 0024, which the gate was fitted with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recall.errors import ConfigError

__all__ = ["AskingModel"]


@dataclass(frozen=True, slots=True)
class AskingModel:
    """The intent a turn's gate reads.

    Attributes:
        weights: over the message's vector (the embedding model's dimensions).
        words: (name, pattern, weight): a pattern found in the lower-cased message adds its
            weight.
        intercept: the model's intercept.
        offset: added to the logit: 0 where the fit's held-out personal messages and small
            talk are misread equally often.
    """

    weights: np.ndarray
    words: tuple[tuple[str, re.Pattern[str], float], ...]
    intercept: float
    offset: float

    def logit(self, text: str, vector: np.ndarray) -> float:
        """The message's intent logit, offset included: above 0 it asks about the user."""
        low = text.lower()
        said = sum(weight for _name, pattern, weight in self.words if pattern.search(low))
        return float(vector @ self.weights) + said + self.intercept + self.offset

    @classmethod
    def from_json(cls, data: Mapping[str, Any], dimensions: int) -> AskingModel:
        """Read `to_json`'s form.

        Raises:
            ConfigError: not an intent model over `dimensions` values.
        """
        try:
            weights = np.asarray(data["weights"], dtype=np.float64)
            if weights.shape != (dimensions,):
                raise ConfigError("the intent's vector weights do not match its dimensions")
            words = tuple(
                (str(w["name"]), re.compile(str(w["pattern"])), float(w["weight"]))
                for w in data["words"]
            )
            return cls(weights, words, float(data["intercept"]), float(data["offset"]))
        except (KeyError, TypeError, ValueError, re.error) as exc:
            raise ConfigError(f"not an intent model: {exc!r}") from exc

    def to_json(self) -> dict[str, Any]:
        """The model as JSON data."""
        return {
            "weights": self.weights.tolist(),
            "words": [
                {"name": name, "pattern": pattern.pattern, "weight": weight}
                for name, pattern, weight in self.words
            ],
            "intercept": self.intercept,
            "offset": self.offset,
        }

    @classmethod
    def of(
        cls,
        weights: Sequence[float] | np.ndarray,
        words: Sequence[tuple[str, str, float]],
        intercept: float,
        offset: float,
    ) -> AskingModel:
        """A model from plain values (patterns as strings), as the fit writes it."""
        compiled = tuple((n, re.compile(p), float(w)) for n, p, w in words)
        return cls(np.asarray(weights, dtype=np.float64), compiled, float(intercept), offset)
