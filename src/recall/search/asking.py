"""Does the message ask about the user's own life or about earlier talk? The intent that a turn's
gate weighs with the match (decision 0039).

A small classifier over the message's vector and a few words of its own (the first person,
"you said", "last time", a question mark): a logistic regression, or one hidden layer of
rectified units before it, fitted by `python benchmarks/fit_intent.py` on small talk, generic
requests and personal questions written for it and on the fit part of the benchmarks'
messages, and shipped in the second stage's file (`"asking"`). Its logit, offset included, is
the `intent` a turn's gate reads; the gate model's own feature of that name is the older intent
model of decision 0024, which the gate was fitted with.
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
        weights: over the message's vector (the embedding model's dimensions); with a hidden
            layer, over its units.
        words: (name, pattern, weight): a pattern found in the lower-cased message adds its
            weight (with a hidden layer, it is an input of 1 and its weight is unused).
        intercept: the model's intercept.
        offset: added to the logit: 0 where the fit's held-out personal messages and small
            talk are misread equally often.
        hidden: None, or a hidden layer's (weights, biases): weights of shape (the vector's
            dimensions plus one per word, units), the words' inputs after the vector's.
    """

    weights: np.ndarray
    words: tuple[tuple[str, re.Pattern[str], float], ...]
    intercept: float
    offset: float
    hidden: tuple[np.ndarray, np.ndarray] | None = None

    def logit(self, text: str, vector: np.ndarray) -> float:
        """The message's intent logit, offset included: above 0 it asks about the user."""
        low = text.lower()
        if self.hidden is not None:
            found = np.array([1.0 if p.search(low) else 0.0 for _n, p, _w in self.words])
            layer, biases = self.hidden
            units = np.maximum(np.concatenate([vector, found]) @ layer + biases, 0.0)
            return float(units @ self.weights) + self.intercept + self.offset
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
            words = tuple(
                (str(w["name"]), re.compile(str(w["pattern"])), float(w["weight"]))
                for w in data["words"]
            )
            hidden = None
            if data.get("hidden") is not None:
                layer = np.asarray(data["hidden"]["weights"], dtype=np.float64)
                biases = np.asarray(data["hidden"]["biases"], dtype=np.float64)
                units = biases.shape[0] if biases.ndim == 1 else -1
                if layer.shape != (dimensions + len(words), units) or weights.shape != (units,):
                    raise ConfigError("the intent's hidden layer does not match its inputs")
                hidden = (layer, biases)
            elif weights.shape != (dimensions,):
                raise ConfigError("the intent's vector weights do not match its dimensions")
            return cls(weights, words, float(data["intercept"]), float(data["offset"]), hidden)
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
            **(
                {}
                if self.hidden is None
                else {
                    "hidden": {
                        "weights": self.hidden[0].tolist(),
                        "biases": self.hidden[1].tolist(),
                    }
                }
            ),
        }

    @classmethod
    def of(
        cls,
        weights: Sequence[float] | np.ndarray,
        words: Sequence[tuple[str, str, float]],
        intercept: float,
        offset: float,
        hidden: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> AskingModel:
        """A model from plain values (patterns as strings), as the fit writes it."""
        compiled = tuple((n, re.compile(p), float(w)) for n, p, w in words)
        return cls(
            np.asarray(weights, dtype=np.float64), compiled, float(intercept), offset, hidden
        )
