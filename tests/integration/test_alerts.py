"""Quota alerts end to end (seed 002): real floodgate processes, a real HTTP
receiver process (http_receiver.py) and real redis-servers.

- 100 concurrent requests crossing 80 % produce exactly one delivery per
  threshold: on the embedded store, on Redis, and with two floodgate servers
  on one Redis;
- the receiver down for a while and back: every event delivered, none twice
  by event_id, each signature verifiable with the secret;
- a graceful restart with pending events re-sends them (spool file / Redis
  stream);
- /v1/alerts/recent, /metrics, check-config, and the clear refusals."""

import concurrent.futures
import hashlib
import hmac
import json
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, metric_value

HERE = Path(__file__).resolve().parent
SECRET = "alert-webhook-secret-42"
ENV = {"FG_ALERT_SECRET": SECRET}


@pytest.fixture(params=["memory", "redis"])
def store(request, redis_server):
    if request.param == "memory":
        return [], None
    backend = redis_server()
    return ["--store", backend.url], backend


def config(port, tmp_dir, limit="100/day", extra=""):
    return f"""\
redis: {{ timeout_ms: 2000 }}
alert_delivery:
  spool: {tmp_dir}/state/alerts.spool
  backoff_initial: 50ms
  backoff_max: 300ms
  timeout_ms: 5000
{extra}
rules:
  quota:
    algorithm: fixed_window
    limits: [{limit}]
    alerts: {{ thresholds: [80, 100], webhook: "http://127.0.0.1:{port}/quota" }}
"""


def check(server, key, cost=1):
    """POST /v1/check; the HTTP status."""
    body = json.dumps({"rule": "quota", "key": key, "cost": cost}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/check", data=body,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            return f.status
    except urllib.error.HTTPError as e:
        return e.code


def get(server, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}{path}", timeout=5) as f:
        return f.read().decode()


def wait_metric(server, name, want, labels=None, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = metric_value(get(server, "/metrics"), name, labels)
        if value == want:
            return
        assert time.monotonic() < deadline, f"{name}{labels or ''} = {value}, want {want}"
        time.sleep(0.05)


def verify(record):
    """The record's signature checks out with the secret, and its
    idempotency key is its event_id; returns the event."""
    body = record["body"].encode()
    want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(record["headers"]["X-Floodgate-Signature"], want), record
    event = json.loads(body)
    assert record["headers"]["Idempotency-Key"] == event["event_id"]
    assert record["path"] == "/quota"
    return event


def crossing_burst(servers, key="user:42"):
    """Spends 70 of 100, then 100 concurrent requests spread over `servers`:
    30 fit, crossing 80 % and reaching 100 %. Returns how many were admitted."""
    assert check(servers[0], key, 70) == 200
    barrier = threading.Barrier(100)

    def one(i):
        barrier.wait()
        return check(servers[i % len(servers)], key)

    with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
        statuses = list(pool.map(one, range(100)))
    assert set(statuses) <= {200, 429}, statuses
    return statuses.count(200)


def assert_one_per_threshold(hook, key="user:42"):
    records = hook.wait_for(2)
    time.sleep(1.0)  # a duplicate would have come by now
    records = hook.wait_for(3, timeout=0)
    events = [verify(r) for r in records]
    assert sorted(e["threshold"] for e in events) == [80, 100], events
    for e in events:
        assert e["rule"] == "quota" and e["key"] == key and e["tier"] is None
        assert e["limit"] == "100/day" and e["capacity"] == 100
        assert e["used"] == e["threshold"]
        assert e["window_end"] - e["window_start"] == 86_400_000
        assert e["window_start"] <= e["at"] < e["window_end"]
    return events


def test_100_concurrent_requests_deliver_one_event_per_threshold(start_server, store, receiver,
                                                                 tmp_dir):
    args, _ = store
    hook = receiver()
    server = start_server(config(hook.port, tmp_dir), extra_args=args, env=ENV)
    assert crossing_burst([server]) == 30
    events = assert_one_per_threshold(hook)
    wait_metric(server, "floodgate_alerts_delivered_total", 2)
    text = get(server, "/metrics")
    assert metric_value(text, "floodgate_alerts_emitted_total") == 2
    assert metric_value(text, "floodgate_alerts_pending") == 0
    assert metric_value(text, "floodgate_alerts_dropped_total", {"reason": "queue_full"}) == 0

    recent = json.loads(get(server, "/v1/alerts/recent"))
    assert recent["enabled"] is True
    assert [e["event_id"] for e in recent["events"]] == [
        e["event_id"] for e in sorted(events, key=lambda e: -e["threshold"])]
    assert all(e["status"] == "delivered" and e["attempts"] == 1 for e in recent["events"])
    assert len(json.loads(get(server, "/v1/alerts/recent?limit=1"))["events"]) == 1


def test_two_servers_on_one_redis_deliver_one_event_per_threshold(floodgate_bin, start_server,
                                                                  redis_server, receiver, tmp_dir):
    backend = redis_server()
    hook = receiver()
    servers = [start_server(config(hook.port, tmp_dir), extra_args=["--store", backend.url],
                            env=ENV) for _ in range(2)]
    assert crossing_burst(servers) == 30
    assert_one_per_threshold(hook)
    emitted = delivered = 0
    for s in servers:
        text = get(s, "/metrics")
        emitted += metric_value(text, "floodgate_alerts_emitted_total")
        delivered += metric_value(text, "floodgate_alerts_delivered_total")
    assert (emitted, delivered) == (2, 2)
    # Every key floodgate wrote has an expiry, the alert stream included.
    out = subprocess.run([str(floodgate_bin), "audit", "--redis", backend.url],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 without a TTL" in out.stderr
    assert backend.client().pttl("fg:{alerts}") > 0


def test_receiver_down_then_back_every_event_once(start_server, store, receiver, tmp_dir):
    args, _ = store
    port = free_port()
    server = start_server(config(port, tmp_dir, limit="10/day"), extra_args=args, env=ENV)
    for i in range(5):
        assert check(server, f"user:{i}", 10) == 200  # 80 % and 100 % at once
    # Nobody listens: the events are retried with backoff.
    deadline = time.monotonic() + 15
    while metric_value(get(server, "/metrics"), "floodgate_alerts_retries_total") < 20:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    text = get(server, "/metrics")
    assert metric_value(text, "floodgate_alerts_delivered_total") == 0
    assert metric_value(text, "floodgate_alerts_pending") == 10
    pending = json.loads(get(server, "/v1/alerts/recent"))["events"]
    assert len(pending) == 10 and all(e["status"] == "pending" for e in pending)
    assert all(e["attempts"] >= 1 and "last_error" in e for e in pending)

    hook = receiver(port=port)
    records = hook.wait_for(10)
    wait_metric(server, "floodgate_alerts_delivered_total", 10)
    time.sleep(0.5)
    records = hook.wait_for(11, timeout=0)
    events = [verify(r) for r in records]
    ids = [e["event_id"] for e in events]
    assert len(ids) == 10 and len(set(ids)) == 10, "every event once, none twice"
    assert sorted((e["key"], e["threshold"]) for e in events) == sorted(
        (f"user:{i}", t) for i in range(5) for t in (80, 100))


def test_a_restart_resends_pending_events(start_server, store, receiver, tmp_dir):
    args, backend = store
    port = free_port()
    text = config(port, tmp_dir, limit="10/day")
    first = start_server(text, extra_args=args, env=ENV)
    for i in range(3):
        assert check(first, f"user:{i}", 10) == 200
    wait_metric(first, "floodgate_alerts_pending", 6)
    emitted = {e["event_id"] for e in json.loads(get(first, "/v1/alerts/recent"))["events"]}
    assert len(emitted) == 6
    first.stop(signal.SIGTERM)  # graceful: exit 0 within the fixture's bound
    if backend is None:
        assert (tmp_dir / "state" / "alerts.spool").exists()
        assert "pending alert events kept for the next start" in first.stderr_text()
    else:
        assert backend.client().xlen("fg:{alerts}") == 6

    hook = receiver(port=port)
    second = start_server(text, extra_args=args, env=ENV)
    records = hook.wait_for(6)
    wait_metric(second, "floodgate_alerts_delivered_total", 6)
    time.sleep(0.5)
    events = [verify(r) for r in hook.wait_for(7, timeout=0)]
    assert {e["event_id"] for e in events} == emitted and len(events) == 6
    assert metric_value(get(second, "/metrics"), "floodgate_alerts_emitted_total") == 0
    if backend is None:
        assert "alert events re-queued from the spool" in second.stderr_text()


def test_serve_refuses_alerts_without_a_secret(start_server, tmp_dir):
    server = start_server(config(9, tmp_dir), env={"FG_ALERT_SECRET": ""}, wait_listening=False)
    assert server.wait_exit(10) == 1
    assert ("rule 'quota' has alerts, but the environment variable FG_ALERT_SECRET (its "
            "alerts.secret_env), which holds the webhook's signing secret, is not set"
            in server.stderr_text())


def test_serve_refuses_a_spool_it_cannot_write(start_server, tmp_dir):
    (tmp_dir / "file").write_text("x")
    text = config(9, tmp_dir).replace(f"{tmp_dir}/state/alerts.spool",
                                      f"{tmp_dir}/file/alerts.spool")
    server = start_server(text, env=ENV, wait_listening=False)
    assert server.wait_exit(10) == 1
    assert "alert_delivery.spool: cannot create the directory" in server.stderr_text()


def test_reload_without_the_secret_keeps_the_old_rules(start_server, tmp_dir):
    server = start_server("rules:\n  quota: { limits: [5/day] }\n", env={"FG_ALERT_SECRET": ""})
    mark = server.reload(config(9, tmp_dir))
    assert server.wait_for(r"reload refused.*FG_ALERT_SECRET", 5, start=mark) is not None
    assert check(server, "k") == 200
    assert json.loads(get(server, "/v1/alerts/recent")) == {"enabled": False, "events": []}


def test_bad_requests_and_check_config(floodgate_bin, start_server, tmp_dir):
    server = start_server(config(9, tmp_dir), env=ENV)
    for query in ("limit=0", "limit=x", "limit=10001", "limit=%zz"):
        try:
            get(server, "/v1/alerts/recent?" + query)
            raise AssertionError("accepted " + query)
        except urllib.error.HTTPError as e:
            assert e.code == 400
            assert e.headers["Content-Type"] == "application/problem+json"
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/alerts/recent",
                                 data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 405
    rules = json.loads(get(server, "/v1/rules"))["rules"]
    assert rules["quota"]["alerts"] == {"thresholds": [80, 100], "secret_env": "FG_ALERT_SECRET",
                                        "webhook": "http://127.0.0.1:9/quota"}

    good = tmp_dir / "good.yaml"
    good.write_text(config(9, tmp_dir))
    out = subprocess.run([str(floodgate_bin), "check-config", str(good)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert ("quota: fixed_window 100/day; on_backend_error=allow; on_store_full=deny; "
            "alerts at 80%, 100% to "
            "http://127.0.0.1:9/quota (secret_env=FG_ALERT_SECRET)") in out.stdout
    bad = tmp_dir / "bad.yaml"
    bad.write_text(config(9, tmp_dir).replace("[80, 100]", "[100, 80]"))
    out = subprocess.run([str(floodgate_bin), "check-config", str(bad)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 1
    assert "'rules.quota.alerts.thresholds' must be in increasing order" in out.stderr + out.stdout


def test_alerts_keep_their_meaning_with_slices(start_server, redis_server, receiver, tmp_dir):
    """A rule with quota slices: a threshold fires once, when a take brings
    the shared count to it (at most one slice early), across two servers."""
    backend = redis_server()
    hook = receiver()
    text = config(hook.port, tmp_dir).replace(
        "    limits: [100/day]\n", "    limits: [100/day]\n    slices: { max_share: 10% }\n")
    assert "slices" in text
    servers = [start_server(text, extra_args=["--store", backend.url], env=ENV)
               for _ in range(2)]
    admitted = crossing_burst(servers)
    held = sum(metric_value(get(s, "/metrics"), "floodgate_slice_units_held") for s in servers)
    # Never over; what was not admitted is held in slices, unspent.
    assert admitted + held == 30, (admitted, held)
    records = hook.wait_for(2)
    time.sleep(1.0)  # a duplicate would have come by now
    events = [verify(r) for r in hook.wait_for(3, timeout=0)]
    assert sorted(e["threshold"] for e in events) == [80, 100], events
    for e in events:
        # Fired by the take that reached it: the shared count then, at most
        # a slice (10 units) past the threshold.
        assert e["threshold"] <= e["used"] < e["threshold"] + 10, e
    emitted = sum(metric_value(get(s, "/metrics"), "floodgate_alerts_emitted_total")
                  for s in servers)
    assert emitted == 2
