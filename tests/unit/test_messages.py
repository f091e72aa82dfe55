from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from recall.messages import (
    is_error_response,
    latest_human_text,
    latest_turn,
    message_text,
    thread_id,
    user_id_from_config,
    user_id_from_context,
    user_id_of,
)


class Identity:
    def __init__(self, identity: object) -> None:
        self.identity = identity


class ProxyUser:
    """Shaped like langgraph_api's ProxyUser (not a Mapping; `.identity` and `["identity"]`).

    The real class is exercised end to end in tests/integration/test_server.py: importing
    langgraph_api outside the server needs its whole configuration.
    """

    def __init__(self, user: Identity) -> None:
        self._user = user

    @property
    def identity(self) -> object:
        return self._user.identity

    def __getitem__(self, key: str) -> object:
        return {"identity": self.identity}[key]


class DictUser(dict[str, Any]):
    """A user object that is a Mapping, as auth handlers may return."""


def _cfg(user: object) -> dict[str, Any]:
    return {"configurable": {"langgraph_auth_user": user}}


@pytest.mark.parametrize(
    "user",
    [
        ProxyUser(Identity("alice")),
        {"identity": "alice"},
        DictUser(identity="alice"),
        Identity("alice"),
        "alice",
    ],
)
def test_every_auth_shape_gives_the_user(user: object) -> None:
    assert user_id_from_config(_cfg(user)) == "alice"


@pytest.mark.parametrize(
    "config",
    [
        None,
        {},
        {"configurable": None},
        {"configurable": {}},
        _cfg(None),
        _cfg({}),
        _cfg({"identity": ""}),
        _cfg({"identity": "   "}),
        _cfg({"identity": 42}),
        _cfg(Identity(None)),
        _cfg(""),
        _cfg(12),
        "not a config",
    ],
)
def test_no_usable_user_is_none(config: Any) -> None:
    assert user_id_from_config(config) is None


def test_thread_id() -> None:
    assert thread_id({"configurable": {"thread_id": "t-1"}}) == "t-1"
    assert thread_id({"configurable": {}}) is None
    assert thread_id(None) is None


def test_message_text_takes_text_blocks() -> None:
    blocks = [
        {"type": "text", "text": "first"},
        {"type": "image_url", "image_url": {"url": "data:..."}},
        "second",
        {"type": "text", "text": None},
    ]
    assert message_text(blocks) == "first\nsecond"
    assert message_text("plain") == "plain"
    assert message_text(None) == ""
    assert message_text(b"bytes") == ""


def test_latest_human_text() -> None:
    state = {
        "messages": [
            HumanMessage("old question"),
            AIMessage("answer"),
            HumanMessage([{"type": "text", "text": "new question"}]),
            AIMessage("latest answer"),
        ]
    }
    assert latest_human_text(state) == "new question"
    assert latest_human_text({"messages": [SystemMessage("sys"), AIMessage("hi")]}) is None
    assert latest_human_text({"messages": []}) is None
    assert latest_human_text({"messages": "oops"}) is None
    assert latest_human_text({}) is None
    assert latest_human_text(None) is None
    assert latest_human_text({"messages": [HumanMessage([{"type": "image_url"}])]}) is None


def test_latest_turn_pairs_the_reply_to_the_latest_human_message() -> None:
    human = HumanMessage("what's the weather?")
    tool_call = AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "1"}])
    reply = AIMessage("Sunny.")
    state = {"messages": [HumanMessage("hi"), AIMessage("hello"), human, tool_call,
                          ToolMessage("sun", tool_call_id="1"), reply]}  # fmt: skip
    assert latest_turn(state) == (human, reply)
    assert latest_turn({"messages": [HumanMessage("no reply yet")]}) is None
    assert latest_turn({"messages": [AIMessage("only ai")]}) is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (AIMessage("Error: the model is overloaded"), True),
        (AIMessage("  error - upstream timeout"), True),
        (AIMessage("Traceback (most recent call last):\n  File ..."), True),
        (AIMessage("fine", response_metadata={"finish_reason": "error"}), True),
        (AIMessage("fine", response_metadata={"error": "rate limited"}), True),
        (AIMessage("fine", additional_kwargs={"error": {"code": 500}}), True),
        (AIMessage("Errors happen to everyone; here is how to fix yours."), False),
        (AIMessage("Your dog is called Max."), False),
    ],
)
def test_error_responses(message: AIMessage, expected: bool) -> None:
    assert is_error_response(message) is expected


@dataclass
class _Context:
    user_id: str


class _Broken:
    @property
    def user_id(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"user_id": "carol"}, "carol"),
        (_Context("dave"), "dave"),
        ({"user_id": "  "}, None),
        ({"user_id": 7}, None),
        (_Broken(), None),
        (None, None),
        ("carol", None),
    ],
)
def test_the_user_of_a_runtime_context(context: object, expected: str | None) -> None:
    assert user_id_from_context(context) == expected


def test_the_auth_user_comes_before_the_context_user() -> None:
    auth = {"configurable": {"langgraph_auth_user": {"identity": "alice"}}}
    assert user_id_of(auth, {"user_id": "carol"}) == "alice"
    assert user_id_of({}, {"user_id": "carol"}) == "carol"
    assert user_id_of({}, None) is None
