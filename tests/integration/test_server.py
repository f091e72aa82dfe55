"""End to end: `langgraph dev` serves the companion graph; two users talk to it over HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, Databases

pytestmark = [pytest.mark.slow, pytest.mark.model]

TOKENS = {"alice": "token-alice", "bob": "token-bob"}
_API = re.compile(r"API: .*?(http://[0-9.]+:\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
async def server_db(databases: Databases) -> str:
    return await databases.create("recall_server")


@pytest.fixture(scope="module")
def server(server_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("langgraph")
    config = {
        "dependencies": [str(ROOT)],
        "graphs": {"companion": f"{ROOT}/graphs/companion.py:graph"},
        "auth": {"path": f"{ROOT}/src/recall/server/auth.py:auth", "disable_studio_auth": True},
        "http": {"app": f"{ROOT}/src/recall/server/app.py:app"},
    }
    (work / "langgraph.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "RECALL_DATABASE_URL": server_db,
        "RECALL_DATA_DIR": str(work / "data" / "pgdata"),
        "RECALL_MODEL_CACHE_DIR": str(ROOT / ".recall" / "models"),  # export the model once
        "RECALL_AUTH_TOKENS": ",".join(f"{t}:{u}" for u, t in TOKENS.items()),
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
                str(_free_port()),
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


def _say(client: httpx.Client, user: str, thread: str, text: str) -> dict[str, Any]:
    response = client.post(
        f"/threads/{thread}/runs/wait",
        json={
            "assistant_id": "companion",
            "input": {"messages": [{"role": "user", "content": text}]},
        },
        headers=_headers(user),
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert "__error__" not in body, body
    return body


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
        run = client.post(
            f"/threads/{first}/runs/wait",
            json={
                "assistant_id": "companion",
                "input": {"messages": [{"role": "user", "content": "hi there"}]},
            },
            headers=_headers("bob"),
        )
        assert run.status_code == 404

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
