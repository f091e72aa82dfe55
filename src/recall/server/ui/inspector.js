// The memory inspector: plain DOM, no framework, no network but this server's /recall/api.
// The token lives in sessionStorage (this tab only) and travels only in the Authorization
// header, never in a URL. Every text from the API is set with textContent, never as HTML.
"use strict";

const TOKEN_KEY = "recall.inspector.token";
const $ = (id) => document.getElementById(id);
let nextCursor = null;

async function api(path, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, {
    ...options,
    headers: { ...(options.headers || {}), Authorization: `Bearer ${token}` },
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    signOut("That token was not accepted.");
    throw new Error("unauthorized");
  }
  if (!response.ok) throw new Error(body.error || `the server answered ${response.status}`);
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function when(iso) {
  return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function memoryItem(m) {
  const li = el("li", "memory");
  li.dataset.testid = "memory";
  li.dataset.id = m.id;
  const meta = el("div", "meta");
  meta.append(el("span", "kind", m.kind), el("time", null, when(m.created_at)));
  if (m.conversation_id) meta.append(el("span", null, `conversation ${m.conversation_id}`));
  if (m.score !== null && m.score !== undefined) {
    const score = el("span", "score", `score ${m.score.toFixed(3)}`);
    if (m.similarity !== null && m.similarity !== undefined) {
      score.title = `cosine similarity ${m.similarity.toFixed(3)}`;
    }
    meta.append(score);
  }
  li.append(meta, el("p", "said", m.user_message));
  if (m.ai_response) li.append(el("p", "reply", m.ai_response));
  if (m.passes === false) {
    li.classList.add("kept-out");
    meta.append(el("span", "verdict", "kept out"));
  }
  if (m.why && m.why.length) li.append(whyItem(m.why, m.explanation));
  if (m.restates) meta.append(el("span", "restates", `restates ${m.restates} memor${m.restates === 1 ? "y" : "ies"}`));
  if (m.repeats) meta.append(el("span", "repeats", `repeated ${m.repeats}×, last ${when(m.last_seen)}`));
  li.append(linksItem(m.id));
  const remove = el("button", "delete", "Delete");
  remove.type = "button";
  remove.dataset.testid = "delete";
  remove.setAttribute("aria-label", "Delete this memory");
  remove.addEventListener("click", () => deleteMemory(m.id, li));
  li.append(remove);
  return li;
}

// Where a memory came from (the memories retrieved for its turn) and the turns that restate
// it, read when the box is opened.
function linksItem(id) {
  const box = el("details", "links");
  box.dataset.testid = "links";
  box.append(el("summary", null, "sources and restatements"));
  box.addEventListener("toggle", async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = "1";
    try {
      const body = await api(`/recall/api/memories/${encodeURIComponent(id)}/links`);
      const list = (title, items) => {
        const p = el("p", null, `${title}: ${items.length ? "" : "none"}`);
        for (const s of items) p.append(el("q", null, s.user_message), " ");
        return p;
      };
      box.append(list("retrieved for it", body.sources), list("restated by", body.restatements));
      if (body.erased && body.erased.length) {
        box.append(el("p", "erased", `${body.erased.length} erased since`));
      }
    } catch (error) {
      box.append(el("p", "error", error.message));
    }
  });
  return box;
}

// Why a memory came (or was kept out), in the words the store wrote (`why`): the message's
// words it holds, how close and how recent it is, the gate; the raw parts of its score
// (`explanation`, the default mode only) one click further.
function whyItem(why, raw) {
  const box = el("details", "why");
  box.dataset.testid = "why";
  box.append(el("summary", null, "why"));
  const list = el("ul", "reasons");
  for (const line of why) list.append(el("li", null, line));
  box.append(list);
  if (raw) {
    const parts = (title, named) => {
      const top = Object.entries(named).slice(0, 5);
      return el("p", null, `${title}: ` + top.map(([k, v]) => `${k} ${v >= 0 ? "+" : ""}${v.toFixed(2)}`).join(", "));
    };
    const more = el("details", "raw");
    more.dataset.testid = "raw";
    more.append(
      el("summary", null, `raw parts: gate ${raw.gate.toFixed(2)}, logit ${raw.logit.toFixed(2)}`),
      parts("gate", raw.gate_parts),
      parts("ranker", raw.ranker),
    );
    box.append(more);
  }
  return box;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "muted";
}

async function loadPage(reset) {
  if (reset) {
    $("memories").replaceChildren();
    nextCursor = null;
  }
  // no limit: a page is the API's own size (recall.limits.PAGE_SIZE), the one default
  const params = new URLSearchParams();
  if (nextCursor) params.set("before", nextCursor);
  const body = await api(`/recall/api/memories?${params}`);
  for (const m of body.memories) $("memories").append(memoryItem(m));
  nextCursor = body.next;
  $("more").hidden = !nextCursor;
  const count = $("memories").children.length;
  setStatus(count ? `${count} shown, newest first.` : "The agent remembers nothing of you.");
}

async function runSearch(event) {
  event.preventDefault();
  const q = $("search").value.trim();
  if (!q) return showAll();
  // the query as typed: the store cuts a long one (RECALL_MAX_QUERY_LENGTH), as for the agent.
  // A mode only when the user picked one: else the store's own (RECALL_MODE), which the
  // answer names. No limit: the API's page (recall.limits.PAGE_SIZE).
  const picked = $("mode").value;
  const params = new URLSearchParams({ q });
  if (picked) params.set("mode", picked);
  try {
    const body = await api(`/recall/api/search?${params}`);
    $("memories").replaceChildren(...body.memories.map(memoryItem));
    $("more").hidden = true;
    $("clear-search").hidden = false;
    if (!picked) $("mode").options[0].textContent = `default mode (${body.mode})`;
    const passing = body.memories.filter((m) => m.passes !== false).length;
    const rule = body.threshold_applies ? `threshold ${body.threshold}` : "no threshold";
    const mode = picked ? body.mode : `${body.mode}, the server's default`;
    setStatus(
      `${body.memories.length} found for “${q}” (${mode}, ${rule}), best first; ` +
        `${passing} would reach the agent.`,
    );
  } catch (error) {
    setStatus(error.message, true);
  }
}

async function showAll() {
  $("search").value = "";
  $("clear-search").hidden = true;
  await loadPage(true);
}

async function deleteMemory(id, li) {
  try {
    await api(`/recall/api/memories/${encodeURIComponent(id)}`, { method: "DELETE" });
    li.remove();
    setStatus("Deleted.");
  } catch (error) {
    setStatus(error.message, true);
  }
}

async function forgetMe() {
  if (!window.confirm("Erase every memory the agent has of you? This cannot be undone.")) return;
  try {
    const body = await api("/recall/api/forget", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ confirm: true }),
    });
    $("memories").replaceChildren();
    $("more").hidden = true;
    setStatus(`Erased ${body.erased} memories. The agent remembers nothing of you.`);
    await loadSummaries();
  } catch (error) {
    setStatus(error.message, true);
  }
}

async function loadSummaries() {
  const body = await api("/recall/api/summaries");
  const box = $("summaries");
  box.replaceChildren();
  for (const s of body.summaries) {
    const p = el("p", null, s.summary);
    p.prepend(el("strong", null, `Conversation ${s.conversation_id} (${when(s.updated_at)}): `));
    box.append(p);
  }
  for (const m of body.written) box.append(el("p", null, `${when(m.created_at)}: ${m.user_message}`));
  if (!box.children.length) box.append(el("p", "muted", "None yet."));
}

async function loadMetrics() {
  const m = await api("/recall/api/metrics");
  $("metrics-figures").textContent =
    `${m.searches} searches in the last ${Math.round(m.window_s / 60)} min · ` +
    `p50 ${m.p50_latency_ms.toFixed(1)} ms · p95 ${m.p95_latency_ms.toFixed(1)} ms · ` +
    `empty ${(100 * m.empty_rate).toFixed(0)}%`;
  drawChart(m.timeline);
}

function drawChart(points) {
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const width = 300, height = 80, step = width / Math.max(points.length, 1);
  const most = Math.max(1, ...points.map((p) => p.searches));
  const slowest = Math.max(1, ...points.map((p) => p.p95_latency_ms));
  const line = [];
  points.forEach((p, i) => {
    const bar = document.createElementNS(ns, "rect");
    const h = (p.searches / most) * (height - 10);
    bar.setAttribute("class", "bar");
    bar.setAttribute("x", String(i * step + 2));
    bar.setAttribute("y", String(height - h));
    bar.setAttribute("width", String(step - 4));
    bar.setAttribute("height", String(h));
    const title = document.createElementNS(ns, "title");
    title.textContent = `${p.searches} searches, p95 ${p.p95_latency_ms.toFixed(1)} ms`;
    bar.append(title);
    svg.append(bar);
    line.push(`${i * step + step / 2},${height - (p.p95_latency_ms / slowest) * (height - 10)}`);
  });
  const path = document.createElementNS(ns, "polyline");
  path.setAttribute("class", "line");
  path.setAttribute("points", line.join(" "));
  svg.append(path);
  const legend = document.createElementNS(ns, "text");
  legend.setAttribute("x", "2");
  legend.setAttribute("y", "88");
  legend.textContent = "bars: searches · line: p95 latency · oldest on the left";
  svg.append(legend);
}

async function enter() {
  const me = await api("/recall/api/me");
  $("who").textContent = `signed in as ${me.user_id}`;
  $("signin").hidden = true;
  $("inspector").hidden = false;
  $("signout").hidden = false;
  await Promise.all([loadPage(true), loadSummaries(), loadMetrics()]);
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").textContent = "";
  $("signin").hidden = false;
  $("inspector").hidden = true;
  $("signout").hidden = true;
  $("signin-error").textContent = message;
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    $("signin-error").textContent = "";
    try {
      await enter();
    } catch (error) {
      if (error.message !== "unauthorized") $("signin-error").textContent = error.message;
    }
  });
  $("search-form").addEventListener("submit", runSearch);
  $("clear-search").addEventListener("click", showAll);
  $("more").addEventListener("click", () => loadPage(false));
  $("forget").addEventListener("click", forgetMe);
  $("signout").addEventListener("click", () => signOut());
  if (sessionStorage.getItem(TOKEN_KEY)) enter().catch(() => signOut());
});
