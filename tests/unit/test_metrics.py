import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from recall.metrics import AlertRules, RetrievalMetrics, prometheus_registry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_known_sequence_gives_the_seed_metrics() -> None:
    m = RetrievalMetrics(clock=Clock())
    m.record("ok", 10.0, [0.9, 0.7])
    m.record("ok", 30.0, [0.5])
    m.record("empty", 20.0)
    m.record("database", 5.0)
    m.record("no_user", 0.1)
    snap = m.snapshot()
    assert snap["searches"] == 4  # no_user is not a search
    assert snap["avg_latency_ms"] == pytest.approx((10 + 30 + 20 + 5) / 4)
    assert snap["p95_latency_ms"] == 30.0
    assert snap["success_rate"] == pytest.approx(3 / 4)
    assert snap["avg_similarity"] == pytest.approx((0.9 + 0.7 + 0.5) / 3)
    assert snap["results_per_query"] == pytest.approx(3 / 3)
    assert snap["empty_rate"] == pytest.approx(1 / 3)
    assert snap["auth_failures"] == 1
    assert snap["errors"]["database"] == 1 and snap["errors"]["embedding"] == 0
    assert m.totals() == {"ok": 2, "empty": 1, "database": 1, "no_user": 1}


def test_the_window_slides() -> None:
    clock = Clock()
    m = RetrievalMetrics(window_s=60, clock=clock)
    m.record("database", 1.0)
    clock.now += 61
    m.record("ok", 2.0, [0.8])
    snap = m.snapshot()
    assert snap["searches"] == 1 and snap["errors"]["database"] == 0
    assert m.totals()["database"] == 1  # totals never reset


def test_alerts_fire_once_and_resolve_once() -> None:
    clock = Clock()
    m = RetrievalMetrics(window_s=10, rules=AlertRules(max_errors=3, min_samples=1000), clock=clock)
    with capture_logs() as logs:
        for _ in range(6):
            m.record("database", 1.0)
        assert m.firing == {"errors.database"}
        clock.now += 11
        for _ in range(3):
            m.record("ok", 1.0, [0.9])
    events = [(e["event"], e["alert"]) for e in logs if e["event"].startswith("memory.alert")]
    assert events == [
        ("memory.alert.fired", "errors.database"),
        ("memory.alert.resolved", "errors.database"),
    ]
    assert m.firing == set()


def test_rate_alerts_need_enough_samples() -> None:
    m = RetrievalMetrics(rules=AlertRules(min_samples=5, min_success_rate=0.9), clock=Clock())
    for _ in range(4):
        m.record("timeout", 5000.0)
    assert "success_rate" not in m.firing
    m.record("timeout", 5000.0)
    assert {"success_rate", "latency_p95", "errors.timeout"} <= m.firing


def test_alerts_can_be_switched_off() -> None:
    m = RetrievalMetrics(alerts_enabled=False, rules=AlertRules(max_errors=1), clock=Clock())
    m.record("embedding", 1.0)
    assert m.firing == set()


def test_prometheus_text_parses() -> None:
    m = RetrievalMetrics(clock=Clock())
    m.record("ok", 12.0, [0.8])
    m.record("embedding", 3.0)
    text = generate_latest(prometheus_registry(m)).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["recall_retrieval_searches"].samples[0].value == 2
    assert families["recall_retrieval_success_rate"].samples[0].value == 0.5
    errors = {s.labels["kind"]: s.value for s in families["recall_retrieval_window_errors"].samples}
    assert errors["embedding"] == 1
    totals = {s.labels["outcome"]: s.value for s in families["recall_retrievals"].samples}
    assert totals == {"embedding": 1.0, "ok": 1.0}
