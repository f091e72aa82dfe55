"""The inspector's JSON API (`/recall/api/...`) against a real database: each user reaches
only their own memories whatever they send, and bad input is a clear 4xx, never a 500."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from recall.limits import PAGE_SIZE
from recall.search.provenance import Provenance
from recall.server import inspector
from recall.store import MemoryStore
from recall.store.results import SearchResult
from recall.store.shared import set_default_store
from recall.testing import FakeEmbeddings

TOKENS = {"alice": "tok-alice", "bob": "tok-bob"}


@pytest.fixture
async def client(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("RECALL_AUTH_TOKENS", ",".join(f"{t}:{u}" for u, t in USERS.items()))
    set_default_store(store)
    app = Starlette(routes=inspector.routes())
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            yield c
    finally:
        set_default_store(None)


USERS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def users() -> dict[str, str]:
    """Fresh user ids for each test, with their tokens (USERS: id -> token)."""
    USERS.clear()
    for name, token in TOKENS.items():
        USERS[f"{name}-{uuid.uuid4().hex[:8]}"] = token
    return {name: uid for name, uid in zip(TOKENS, USERS, strict=True)}


def _auth(users: dict[str, str], name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {USERS[users[name]]}"}


async def _seed(store: MemoryStore, user: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        added = await store.add_turn(user, f"fact number {i} about {user}", f"noted {i}")
        ids.append(added.id)
    return ids


async def test_every_call_needs_a_valid_token(client: httpx.AsyncClient) -> None:
    for method, path in [
        ("GET", "/recall/api/me"),
        ("GET", "/recall/api/memories"),
        ("GET", "/recall/api/search?q=x"),
        ("DELETE", f"/recall/api/memories/{uuid.uuid4()}"),
        ("POST", "/recall/api/forget"),
        ("GET", "/recall/api/summaries"),
        ("GET", "/recall/api/metrics"),
    ]:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic tok-bob"}):
            response = await client.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert response.json() == {"error": "sign in with a valid token"}


async def test_pages_list_only_the_users_memories_newest_first(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    await _seed(store, users["alice"], 5)
    await _seed(store, users["bob"], 2)
    me = await client.get("/recall/api/me", headers=_auth(users, "alice"))
    assert me.json() == {"user_id": users["alice"]}

    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"before": cursor} if cursor else {})}
        page = (
            await client.get("/recall/api/memories", params=params, headers=_auth(users, "alice"))
        ).json()
        seen += page["memories"]
        cursor = page["next"]
        if cursor is None:
            break
    assert [m["user_message"] for m in seen] == [
        f"fact number {i} about {users['alice']}" for i in reversed(range(5))
    ]
    assert {m["kind"] for m in seen} == {"turn"}


async def test_search_returns_scores_and_stays_within_the_user(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    await _seed(store, users["alice"], 3)
    await _seed(store, users["bob"], 3)
    for mode in ("semantic", "keyword", "hybrid"):
        response = await client.get(
            "/recall/api/search",
            params={"q": "fact number 1", "mode": mode},
            headers=_auth(users, "bob"),
        )
        body = response.json()
        assert response.status_code == 200 and body["mode"] == mode
        assert body["memories"], mode
        assert all(users["bob"] in m["user_message"] for m in body["memories"]), mode
        assert all(m["score"] is not None for m in body["memories"]), mode
        # every result up to the limit, each marked against the store's threshold
        assert body["threshold"] == store.settings.similarity_threshold
        assert all(
            m["passes"] == (mode == "keyword" or m["score"] >= body["threshold"])
            for m in body["memories"]
        ), mode


def _answer(body: dict[str, Any]) -> list[tuple[str, float, bool]]:
    return [(m["id"], m["score"], m["passes"]) for m in body["memories"]]


def _found(result: SearchResult) -> list[tuple[str, float | None, bool]]:
    return [(f.memory.id, f.memory.score, f.passes) for f in result.found]


async def test_a_search_without_a_mode_takes_the_stores(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    """Issue 48: the mode left out is the store's (RECALL_MODE), and the answer says which."""
    await _seed(store, users["alice"], 3)
    for mode in ("semantic", "keyword"):
        own = store.settings.replace(mode=mode)
        async with MemoryStore.connect(own, embeddings=FakeEmbeddings(64)) as served:
            set_default_store(served)
            response = await client.get(
                "/recall/api/search",
                params={"q": "fact number 1"},
                headers=_auth(users, "alice"),
            )
        set_default_store(store)
        assert response.status_code == 200 and response.json()["mode"] == mode
        assert response.json()["memories"], mode


async def test_a_long_query_is_cut_as_the_store_cuts_it(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    """Issue 48: the inspector refused a query over RECALL_MAX_QUERY_LENGTH that the store
    (and so the agent) would have cut; it passes it on, and the store cuts it."""
    alice = users["alice"]
    await _seed(store, alice, 4)
    cut = store.settings.max_query_length
    kept = ("fact number 2 " * cut)[:cut]
    beyond = "fact number 3 about somebody else entirely " * 10
    response = await client.get(
        "/recall/api/search", params={"q": kept + beyond}, headers=_auth(users, "alice")
    )
    assert response.status_code == 200, response.text
    # the answer for the first `cut` characters, as the store gives it for the whole text
    for asked in (kept, kept + beyond):
        direct = await store.find(
            alice, asked, PAGE_SIZE, explain=True, kept_out=True, intent=False
        )
        assert _answer(response.json()) == _found(direct)
    assert response.json()["memories"]


async def test_the_default_search_and_page_are_the_stores_one_page_each(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    """Issue 48: the search API's default page was 10 while the page asked for 20 (and the
    list's 20 was written twice): one size (`recall.limits.PAGE_SIZE`), which the page leaves
    to the API, and the default search is the store's own at that size."""
    alice = users["alice"]
    await _seed(store, alice, PAGE_SIZE + 5)
    listed = await client.get("/recall/api/memories", headers=_auth(users, "alice"))
    assert len(listed.json()["memories"]) == PAGE_SIZE and listed.json()["next"]
    found = await client.get(
        "/recall/api/search", params={"q": "fact number 7"}, headers=_auth(users, "alice")
    )
    body = found.json()
    direct = await store.find(
        alice, "fact number 7", PAGE_SIZE, explain=True, kept_out=True, intent=False
    )
    assert body["mode"] == store.settings.mode and len(body["memories"]) == PAGE_SIZE
    assert _answer(body) == _found(direct)
    # the page names no limit in its requests: it asks for the API's page
    script = (await client.get("/recall/ui/inspector.js")).text
    code = "\n".join(line.split("//")[0] for line in script.splitlines())
    assert "limit" not in code


async def test_a_user_cannot_delete_another_users_memory(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    [alices] = await _seed(store, users["alice"], 1)
    stolen = await client.delete(f"/recall/api/memories/{alices}", headers=_auth(users, "bob"))
    assert stolen.status_code == 404 and stolen.json() == {"error": "no such memory"}
    assert await store.get(users["alice"], alices) is not None
    own = await client.delete(f"/recall/api/memories/{alices}", headers=_auth(users, "alice"))
    assert own.status_code == 200 and await store.get(users["alice"], alices) is None


async def test_forget_needs_confirmation_and_erases_only_the_caller(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    await _seed(store, users["alice"], 2)
    await _seed(store, users["bob"], 2)
    for body in (None, {}, {"confirm": "yes"}, [True]):
        refused = await client.post("/recall/api/forget", json=body, headers=_auth(users, "bob"))
        assert refused.status_code == 400 and "confirm" in refused.json()["error"]
    done = await client.post(
        "/recall/api/forget", json={"confirm": True}, headers=_auth(users, "bob")
    )
    assert done.json() == {"erased": 2}
    assert await store.recent(users["bob"], 5) == []
    assert len(await store.recent(users["alice"], 5)) == 2


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/recall/api/memories?limit=0", 400),
        ("/recall/api/memories?limit=abc", 400),
        ("/recall/api/memories?limit=101", 400),
        ("/recall/api/memories?before=yesterday", 400),
        ("/recall/api/memories?before=2024-01-01T00:00:00%2B00:00|not-a-uuid", 400),
        ("/recall/api/search", 400),
        ("/recall/api/search?q=%20%20", 400),
        ("/recall/api/search?q=x&mode=fuzzy", 400),
        ("/recall/api/memories/not-a-uuid", 405),
        ("/recall/ui/secrets.txt", 404),
    ],
)
async def test_bad_input_is_a_clear_4xx(
    client: httpx.AsyncClient, users: dict[str, str], path: str, status: int
) -> None:
    response = await client.get(path, headers=_auth(users, "alice"))
    assert response.status_code == status, response.text
    if status == 400:
        assert response.json()["error"]


async def test_deleting_an_unknown_or_malformed_id_is_a_404(
    client: httpx.AsyncClient, users: dict[str, str]
) -> None:
    for memory_id in (str(uuid.uuid4()), "not-a-uuid", "%27%20OR%201%3D1"):
        response = await client.delete(
            f"/recall/api/memories/{memory_id}", headers=_auth(users, "alice")
        )
        assert response.status_code == 404, memory_id


async def test_summaries_and_metrics_answer(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    uid = users["alice"]
    [last] = await _seed(store, uid, 1)
    await store.conversations.set_chat_summary(
        uid, "conv-1", "Alice talked about facts.", last_memory_id=last
    )
    body = (await client.get("/recall/api/summaries", headers=_auth(users, "alice"))).json()
    assert [s["summary"] for s in body["summaries"]] == ["Alice talked about facts."]
    assert body["written"] == []
    written = await store.add_turn(
        uid, "Alice collects facts", "", conversation_id="conv-1", kind="summary"
    )
    await _seed(store, uid, 3)  # newer turns do not hide it: the page is of summaries only
    body = (await client.get("/recall/api/summaries", headers=_auth(users, "alice"))).json()
    assert [(m["id"], m["kind"]) for m in body["written"]] == [(written.id, "summary")]
    metrics = (await client.get("/recall/api/metrics", headers=_auth(users, "alice"))).json()
    assert set(metrics) >= {"searches", "p50_latency_ms", "p95_latency_ms", "empty_rate"}
    assert len(metrics["timeline"]) == 10


async def test_the_page_and_its_assets_come_from_the_app(client: httpx.AsyncClient) -> None:
    page = await client.get("/recall/ui")
    assert page.status_code == 200 and 'data-testid="token"' in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN, no external asset
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name, kind in inspector.ASSETS.items():
        asset = await client.get(f"/recall/ui/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)


async def test_a_memory_shows_its_sources_and_restatements(
    client: httpx.AsyncClient, store: MemoryStore, users: dict[str, str]
) -> None:
    alice = users["alice"]
    fact = await store.add_turn(alice, "I drive a Toyota Prius.", "Noted.")
    quoted = Provenance((fact.id,), (fact.id,), True)
    again = await store.add_turn(
        alice, "What car do I drive?", "You drive a Toyota Prius.", provenance=quoted
    )
    r = await client.get(f"/recall/api/memories/{fact.id}/links", headers=_auth(users, "alice"))
    assert r.status_code == 200
    body = r.json()
    assert [m["id"] for m in body["restatements"]] == [again.id]
    assert body["sources"] == []
    r = await client.get(f"/recall/api/memories/{again.id}/links", headers=_auth(users, "alice"))
    body = r.json()
    assert [m["id"] for m in body["sources"]] == [fact.id]
    assert body["quoted"] == [fact.id]
    assert body["memory"]["restates"] == 1
    assert body["erased"] == []
    # its source deleted: the restatement's provenance keeps the id, listed as erased
    assert await store.delete(alice, fact.id)
    r = await client.get(f"/recall/api/memories/{again.id}/links", headers=_auth(users, "alice"))
    body = r.json()
    assert (body["sources"], body["quoted"], body["erased"]) == ([], [fact.id], [fact.id])
    # another user's memory is not found, whatever its id
    r = await client.get(f"/recall/api/memories/{fact.id}/links", headers=_auth(users, "bob"))
    assert r.status_code == 404
