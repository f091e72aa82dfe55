"""End to end: `langgraph dev` serves the companion graph, the notes graph and the
`create_agent` assistant; two users talk to them over HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, Databases, free_port

pytestmark = [pytest.mark.slow, pytest.mark.model]

TOKENS = {"alice": "token-alice", "bob": "token-bob", "ops": "token-ops"}
_API = re.compile(r"API: .*?(http://[0-9.]+:\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
async def server_db(databases: Databases) -> str:
    return await databases.create("recall_server")


@pytest.fixture(scope="module")
def server(server_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("langgraph")
    # the project's own langgraph.json, its relative paths made absolute
    config = json.loads((ROOT / "langgraph.json").read_text().replace('"./', f'"{ROOT}/'))
    config["dependencies"] = [str(ROOT)]
    (work / "langgraph.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "RECALL_DATABASE_URL": server_db,
        "RECALL_DATA_DIR": str(work / "data" / "pgdata"),
        "RECALL_MODEL_CACHE_DIR": str(ROOT / ".recall" / "models"),  # export the model once
        "RECALL_AUTH_TOKENS": ",".join(f"{t}:{u}" for u, t in TOKENS.items()),
        "RECALL_OPERATORS": "ops",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("RECALL_CHAT_MODEL", None)
    log_path = work / "server.log"
    langgraph = Path(sys.executable).parent / "langgraph"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                str(langgraph),
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(free_port()),
                "--config",
                str(work / "langgraph.json"),
            ],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = _wait_for_api(proc, log_path)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # stopped by its pid (and its children)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _wait_for_api(proc: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + 180
    url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"langgraph dev exited:\n{log_path.read_text()[-4000:]}")
        text = _ANSI.sub("", log_path.read_text())
        if url is None and (match := _API.search(text)):
            url = match.group(1)  # the server moves to another port when ours is taken
        if url is not None:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
        time.sleep(0.5)
    raise AssertionError(f"langgraph dev did not start:\n{log_path.read_text()[-4000:]}")


def _headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def _new_thread(client: httpx.Client, user: str) -> str:
    response = client.post("/threads", json={}, headers=_headers(user))
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


def _say(
    client: httpx.Client,
    user: str,
    thread: str,
    text: str,
    assistant: str = "companion",
) -> dict[str, Any]:
    body = {"assistant_id": assistant, "input": {"messages": [{"role": "user", "content": text}]}}
    response = client.post(f"/threads/{thread}/runs/wait", json=body, headers=_headers(user))
    assert response.status_code == 200, response.text
    state: dict[str, Any] = response.json()
    assert "__error__" not in state, state
    return state


def _run_status(client: httpx.Client, user: str, thread: str, assistant: str) -> int:
    """The status of `user`'s run of "hi there" on `thread` (404: not theirs)."""
    body = {
        "assistant_id": assistant,
        "input": {"messages": [{"role": "user", "content": "hi there"}]},
    }
    return client.post(
        f"/threads/{thread}/runs/wait", json=body, headers=_headers(user)
    ).status_code


def test_a_user_is_remembered_across_threads_and_nobody_else_sees_it(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as client:
        assert client.post("/threads", json={}).status_code == 401  # no token
        assert (
            client.post("/threads", json={}, headers={"Authorization": "Bearer nope"}).status_code
            == 401
        )

        first = _new_thread(client, "alice")
        reply = _say(client, "alice", first, "I adopted a dog named Max")
        assert reply["messages"][-1]["type"] == "ai"
        assert reply["user_context"] == {"user_id": "alice", "authenticated": True}

        second = _new_thread(client, "alice")
        recalled = _say(client, "alice", second, "What is my dog's name?")
        texts = [m["user_message"] for m in recalled["retrieved_memories"]]
        assert "I adopted a dog named Max" in texts
        assert "Max" in recalled["messages"][-1]["content"]  # the offline responder used it

        bobs = _new_thread(client, "bob")
        for_bob = _say(client, "bob", bobs, "What is my dog's name?")
        assert all("Max" not in m["user_message"] for m in for_bob["retrieved_memories"])

        # bob cannot read or run alice's thread
        assert client.get(f"/threads/{first}", headers=_headers("bob")).status_code == 404
        assert _run_status(client, "bob", first, "companion") == 404

        # the memory inspector is served by the same app, inside langgraph dev
        page = client.get("/recall/ui")
        assert page.status_code == 200 and 'data-testid="token"' in page.text
        mine = client.get("/recall/api/memories", headers=_headers("alice")).json()["memories"]
        assert any(m["user_message"] == "I adopted a dog named Max" for m in mine)
        theirs = client.get("/recall/api/memories", headers=_headers("bob")).json()["memories"]
        assert all("Max" not in m["user_message"] for m in theirs)

        health = client.get("/recall/health", headers=_headers("alice"))
        assert health.status_code == 200 and health.json()["ok"] is True

        # the LangGraph server keeps its own /metrics; ours is mounted beside it
        scraped = client.get("/recall/metrics")
        assert scraped.status_code == 200
        families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
        assert "recall_retrievals" in families, scraped.text
        totals = {s.labels["outcome"]: s.value for s in families["recall_retrievals"].samples}
        assert totals.get("ok", 0) >= 1 and sum(totals.values()) >= 3
        assert client.get("/recall/stats").json()["window"]["searches"] >= 3


def test_the_agent_assistant_remembers_across_threads_and_nobody_else_sees_it(
    server: str,
) -> None:
    """The `agent` graph (create_agent with RecallMiddleware, its offline model quoting what
    its system prompt holds) under the same tokens and rules as the companion."""
    with httpx.Client(base_url=server, timeout=120) as client:
        first = _new_thread(client, "alice")
        _say(client, "alice", first, "My sister lives in Ghent", assistant="agent")
        second = _new_thread(client, "alice")
        out = _say(client, "alice", second, "Where does my sister live?", assistant="agent")
        assert out["retrieved_memories"][0]["user_message"] == "My sister lives in Ghent"
        assert "Ghent" in out["messages"][-1]["content"]  # it reached the model's prompt

        bobs = _new_thread(client, "bob")
        for_bob = _say(client, "bob", bobs, "Where does my sister live?", assistant="agent")
        assert for_bob["retrieved_memories"] == []
        assert "Ghent" not in for_bob["messages"][-1]["content"]
        assert _run_status(client, "bob", first, "agent") == 404
        mine = client.get("/recall/api/memories", headers=_headers("alice")).json()["memories"]
        assert [m["user_message"] for m in mine].count("My sister lives in Ghent") == 1


ITEM = {"namespace": ["alice", "notes"], "key": "k1", "value": {"city": "Lisbon"}}


def _call(
    client: httpx.Client, method: str, path: str, user: str | None, body: Any = None
) -> httpx.Response:
    return client.request(method, path, json=body, headers=_headers(user) if user else {})


def test_no_token_reaches_no_resource(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        for method, path, body in [
            ("PUT", "/store/items", ITEM),
            ("POST", "/store/items/search", {"namespace_prefix": []}),
            ("POST", "/assistants/search", {}),
            ("POST", "/runs/crons", {"assistant_id": "companion", "schedule": "0 0 * * *"}),
            ("POST", "/threads", {}),
        ]:
            assert _call(client, method, path, None, body).status_code == 401, (method, path)


def test_store_users_reach_only_their_own_namespaces(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        assert _call(client, "PUT", "/store/items", "alice", ITEM).status_code == 204
        stolen = {**ITEM, "key": "k2", "value": {"city": "Paris"}}
        assert _call(client, "PUT", "/store/items", "bob", stolen).status_code == 403
        read = "/store/items?namespace=alice.notes&key=k1"
        assert _call(client, "GET", read, "bob").status_code == 403
        assert _call(client, "GET", read, "alice").json()["value"] == {"city": "Lisbon"}
        everything: dict[str, list[str]] = {"namespace_prefix": []}
        bob_search = _call(client, "POST", "/store/items/search", "bob", everything)
        assert bob_search.status_code == 200 and bob_search.json()["items"] == []
        aimed = {"namespace_prefix": ["alice"]}
        assert _call(client, "POST", "/store/items/search", "bob", aimed).status_code == 403
        assert _call(client, "POST", "/store/namespaces", "bob", {}).json()["namespaces"] == []
        at_alice = {"prefix": ["alice"]}
        assert _call(client, "POST", "/store/namespaces", "bob", at_alice).status_code == 403
        alices = _call(client, "POST", "/store/namespaces", "alice", {}).json()["namespaces"]
        assert alices == [["alice", "notes"]]
        gone = {"namespace": ["alice", "notes"], "key": "k1"}
        assert _call(client, "DELETE", "/store/items", "bob", gone).status_code == 403
        assert _call(client, "GET", read, "alice").status_code == 200  # still there


def test_notes_graph_keeps_each_users_notes_to_them(server: str) -> None:
    """LangMem's tools and runtime.store on the server's RecallStore: a note alice saves
    through the notes graph is found for her, not for bob, even when bob names her in the
    run's config, nor through the /store API."""
    with httpx.Client(base_url=server, timeout=120) as client:
        alices = _new_thread(client, "alice")
        saved = _say(client, "alice", alices, "remember my locker code is 4417", "notes")
        assert saved["messages"][-1]["content"] == "Noted."
        found = _say(client, "alice", _new_thread(client, "alice"), "my locker code?", "notes")
        assert "4417" in found["messages"][-1]["content"]

        bobs = _new_thread(client, "bob")
        assert (
            "4417"
            not in _say(client, "bob", bobs, "my locker code?", "notes")["messages"][-1]["content"]
        )
        # the user id is a key the server sets itself: bob cannot pose as alice
        spoof = {"langgraph_auth_user_id": "alice", "langgraph_user_id": "alice"}
        response = client.post(
            f"/threads/{bobs}/runs/wait",
            json={
                "assistant_id": "notes",
                "input": {"messages": [{"role": "user", "content": "my locker code?"}]},
                "config": {"configurable": spoof},
            },
            headers=_headers("bob"),
        )
        assert response.status_code in (200, 422), response.text
        # the messages' contents, not the raw reply: its random message ids may hold "4417"
        said = (
            [str(m["content"]) for m in response.json()["messages"]]
            if response.status_code == 200
            else [response.text]
        )
        assert all("4417" not in text for text in said)

        # the same notes through the /store API: alice's own, and closed to bob
        search = {"namespace_prefix": ["alice", "notes"], "query": "locker code"}
        hits = _call(client, "POST", "/store/items/search", "alice", search).json()["items"]
        assert any("4417" in json.dumps(hit["value"]) for hit in hits)
        assert hits[0]["score"] is not None  # ranked by the store's index
        assert _call(client, "POST", "/store/items/search", "bob", search).status_code == 403

        wiped = _say(client, "alice", alices, "forget everything", "notes")
        assert wiped["messages"][-1]["content"].startswith("Forgotten: ")
        after = _call(client, "POST", "/store/items/search", "alice", search).json()["items"]
        assert all("4417" not in json.dumps(hit["value"]) for hit in after)


def test_assistants_are_read_by_all_and_changed_only_by_operators(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        found = _call(client, "POST", "/assistants/search", "bob", {})
        assert found.status_code == 200
        assert {a["graph_id"] for a in found.json()} == {"companion", "notes", "agent"}
        companion = next(a for a in found.json() if a["graph_id"] == "companion")
        path = f"/assistants/{companion['assistant_id']}"
        assert _call(client, "GET", path, "bob").status_code == 200
        owned = {"metadata": {"owner": "bob"}}
        assert _call(client, "PATCH", path, "bob", owned).status_code == 403
        assert _call(client, "DELETE", path, "bob").status_code == 403
        assert (
            _call(client, "POST", "/assistants", "bob", {"graph_id": "companion"}).status_code
            == 403
        )
        checked = {"metadata": {"checked": True}}
        assert _call(client, "PATCH", path, "ops", checked).status_code == 200
        assert (
            _call(client, "GET", path, "alice").status_code == 200
        )  # bob's attempts broke nothing


def test_crons_are_for_operators(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        cron = {"assistant_id": "companion", "schedule": "0 0 * * *"}
        assert _call(client, "POST", "/runs/crons", "bob", cron).status_code == 403
        assert _call(client, "POST", "/runs/crons/search", "bob", {}).status_code == 403
