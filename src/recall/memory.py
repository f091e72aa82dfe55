"""The `Memory` record, the `MemoryRow` a read or search returns it from, and the checks every
turn passes before it is stored."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from recall.errors import InvalidInputError

__all__ = [
    "KINDS",
    "LIBRARY_KEY",
    "MAX_ID_LENGTH",
    "MAX_SUMMARY_LENGTH",
    "Memory",
    "Turn",
    "clean_id",
    "clean_text",
    "content_hash",
    "embedding_text",
    "library_bytes",
    "make_turn",
    "own_words",
    "stored_length",
]

# what a memory is: a user/AI turn, an imported note, or a summary a model wrote
KINDS = ("turn", "note", "summary")
_SURROGATE = re.compile("[\ud800-\udfff]")

# user and conversation ids go into btree indexes, whose entries must stay under ~2.7 kB
MAX_ID_LENGTH = 512

# a model-written memory (kind "summary") is stored up to this long, whatever a turn's limit
MAX_SUMMARY_LENGTH = 4000

LIBRARY_KEY = "recall"
"""The metadata key the library keeps its own data under (provenance, repeats, a reply's own
words: `recall.search.provenance`)."""


def stored_length(kind: object, max_message_length: int) -> int:
    """How long a text of this kind may be stored: `max_message_length`, and for a summary at
    least `MAX_SUMMARY_LENGTH` (memory creation stores them so), so an exported summary
    imports whole."""
    if kind == "summary":
        return max(max_message_length, MAX_SUMMARY_LENGTH)
    return max_message_length


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored turn: what the user said and what the AI answered.

    Attributes:
        id: the memory's uuid, as a string.
        user_message: the user's text.
        ai_response: the AI's reply.
        similarity: cosine similarity to the query (0-1), None where there was no query.
        conversation_id: the conversation (LangGraph thread) it came from, if known.
        created_at: when the turn happened (timezone-aware).
        metadata: free JSON data stored with the turn.
        kind: "turn" (a user/AI pair), "note" (imported text) or "summary" (model-written).
        score: what the search ranked by and the threshold compares: cosine (semantic), BM25
            (keyword) or, in the default mode, the second stage's gated score 0-1
            (docs/retrieval.md); None where there was no query.
        explanation: with `search(..., explain=True)` in the default mode, the parts of the
            score by feature (`recall.search.scored.Explanation.as_dict`); else None.
    """

    id: str
    user_message: str
    ai_response: str
    similarity: float | None
    conversation_id: str | None
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "turn"
    score: float | None = None
    explanation: dict[str, Any] | None = None


def library_bytes(max_length: int) -> int:
    """How large the library's metadata entry (`LIBRARY_KEY`) may be for a turn whose texts
    are at most `max_length` characters long: a reply's own part (at most the reply, up to 6
    bytes a character as JSON) and a few kB of ids and counts. It counts against this, not
    against the caller's `max_metadata_bytes`."""
    return 6 * max_length + 8192


def own_words(metadata: Mapping[str, Any] | None) -> str | None:
    """The part of a stored reply that is its own, recorded under `LIBRARY_KEY` ("own"): the
    reply less the sentences that restate the memories it quotes (decision 0038); None when
    none was recorded (the whole reply is its own). Only a string counts, as in the full-text
    trigger (migration 0024)."""
    recorded = (metadata or {}).get(LIBRARY_KEY)
    if not isinstance(recorded, Mapping):
        return None
    own = recorded.get("own")
    return own if isinstance(own, str) else None


def embedding_text(user_message: str, ai_response: str, own: str | None = None) -> str:
    """The text embedded for a stored turn: both sides, so either can match a query; of the
    reply only its own part (`own_words`) where one was recorded, so that a turn is not found
    by the memories its reply quotes (decision 0038)."""
    return f"{user_message}\n{ai_response if own is None else own}"


@dataclass(frozen=True, slots=True)
class Turn:
    """A validated turn, ready to embed and store."""

    user_id: str
    user_message: str
    ai_response: str
    conversation_id: str | None
    created_at: datetime | None
    metadata: dict[str, Any]
    metadata_json: str
    content_hash: bytes
    kind: str = "turn"

    @property
    def text(self) -> str:
        """The text that is embedded for this turn: its user text and its reply's own words."""
        return embedding_text(self.user_message, self.ai_response, own_words(self.metadata))


def clean_id(value: object, name: str, *, required: bool = True) -> str | None:
    """Check an id: a non-blank string of at most 512 characters with no NUL or lone surrogate.

    Ids are never altered (altering one could merge two users), only accepted or refused.

    Raises:
        InvalidInputError: the id is missing, not a string, blank, too long or not encodable.
    """
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInputError(f"{name} is {len(value)} characters; at most {MAX_ID_LENGTH}")
    if "\x00" in value:
        raise InvalidInputError(f"{name} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} contains a lone surrogate: {exc.reason}") from exc
    return value


def clean_text(value: object, name: str, *, max_length: int, cut: bool = True) -> str:
    """Prepare a text for storage or search.

    Clean-ups (documented in docs/configuration.md): NUL characters are removed (PostgreSQL
    cannot store them), lone surrogates become U+FFFD, and the text is cut to `max_length`
    (unless `cut` is False: then a longer text is refused).

    Raises:
        InvalidInputError: not a string, empty/whitespace only after clean-up, or longer than
            `max_length` when `cut` is False.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, not {type(value).__name__}")
    text = value.replace("\x00", "")
    text = _SURROGATE.sub("\ufffd", text) if _has_surrogate(text) else text
    if not text.strip():
        raise InvalidInputError(f"{name} must not be empty or whitespace only")
    if not cut and len(text) > max_length:
        raise InvalidInputError(
            f"{name} is {len(text):,} characters, over the {max_length:,} it would be cut to; "
            "a memory that keeps its id is not cut"
        )
    return text[:max_length]


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _json_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def _clean_metadata(value: object, max_bytes: int, max_length: int) -> tuple[dict[str, Any], str]:
    if value is None:
        return {}, "{}"
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, not {type(value).__name__}")
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except RecursionError as exc:
        raise InvalidInputError("metadata is nested too deeply to store") from exc
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serializable: {exc}") from exc
    if "\\u0000" in encoded or _has_surrogate(encoded):
        raise InvalidInputError("metadata must not contain NUL characters or lone surrogates")
    size = len(encoded.encode("utf-8"))
    if size > max_bytes and LIBRARY_KEY in value:
        # the library's entry (provenance, a reply's own words) does not count against the
        # caller's limit, so that a memory `recall export` wrote imports again; it has its own
        size = _json_bytes({k: v for k, v in value.items() if k != LIBRARY_KEY})
        library = _json_bytes(value[LIBRARY_KEY])
        if library > (limit := library_bytes(max_length)):
            raise InvalidInputError(
                f"metadata's {LIBRARY_KEY!r} entry is {library} bytes as JSON; at most {limit}"
            )
    if size > max_bytes:
        raise InvalidInputError(f"metadata is {size} bytes as JSON; at most {max_bytes}")
    decoded: dict[str, Any] = json.loads(encoded)
    return decoded, encoded


def _clean_created_at(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidInputError(f"created_at {value!r} is not an ISO 8601 date") from exc
    if not isinstance(value, datetime):
        raise InvalidInputError(f"created_at must be a datetime, not {type(value).__name__}")
    # a naive datetime is taken as UTC rather than as the server's local time
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def content_hash(
    user_id: str, conversation_id: str | None, user_message: str, ai_response: str, kind: str
) -> bytes:
    """What makes a memory the same memory (`Turn.content_hash`): its user, conversation,
    cleaned texts and, for a note or summary, its kind. Storing a turn with a hash the user
    already holds stores nothing."""
    return hashlib.sha256(
        json.dumps(
            [user_id, conversation_id, user_message, ai_response]
            + ([] if kind == "turn" else [kind]),
            ensure_ascii=False,
        ).encode("utf-8")
    ).digest()


def make_turn(
    user_id: object,
    user_message: object,
    ai_response: object,
    *,
    conversation_id: object = None,
    created_at: object = None,
    metadata: object = None,
    max_length: int = 2000,
    max_metadata_bytes: int = 65536,
    kind: str = "turn",
    cut: bool = True,
) -> Turn:
    """Validate and clean one turn (or, with kind "note"/"summary", one text whose
    `ai_response` may be empty); the content hash makes storing it idempotent.

    `cut` False refuses a text longer than `max_length` instead of cutting it: an imported
    memory that keeps its id (a line of `recall export`) must keep its text too, or it would
    be another memory (another content hash) under the same id.

    Raises:
        InvalidInputError: any field is unusable (see `clean_id`, `clean_text`).
    """
    if kind not in KINDS:
        raise InvalidInputError(f"kind must be turn, note or summary, not {kind!r}")
    uid = clean_id(user_id, "user_id")
    assert uid is not None  # required=True never returns None
    cid = clean_id(conversation_id, "conversation_id", required=False)
    user_text = clean_text(user_message, "user_message", max_length=max_length, cut=cut)
    if kind != "turn" and ai_response == "":
        ai_text = ""
    else:
        ai_text = clean_text(ai_response, "ai_response", max_length=max_length, cut=cut)
    meta, meta_json = _clean_metadata(metadata, max_metadata_bytes, max_length)
    digest = content_hash(uid, cid, user_text, ai_text, kind)
    return Turn(
        user_id=uid,
        user_message=user_text,
        ai_response=ai_text,
        conversation_id=cid,
        created_at=_clean_created_at(created_at),
        metadata=meta,
        metadata_json=meta_json,
        content_hash=digest,
        kind=kind,
    )
