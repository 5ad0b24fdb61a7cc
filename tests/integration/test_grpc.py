"""Envoy's RateLimitService (gRPC) driven by Node's @grpc/grpc-js, with the
messages loaded from proto/ by @grpc/proto-loader (tests/integration/node_grpc),
against the embedded store and a real redis-server; envoyproxy/ratelimit's
README examples as the configuration, read from a directory of files as its
runtime directory is; and the front's lifecycle: check-config, bad files,
/metrics, SIGHUP."""

import re
import subprocess

import pytest

from conftest import NODE_GRPC_DIR as NODE_DIR
from conftest import metric_value

# envoyproxy/ratelimit's README examples, one file per domain.
EXAMPLES = {
    "messaging.yaml": """\
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
""",
    "edge.yaml": """\
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
""",
    "internal.yaml": """\
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
""",
    "example6.yaml": """\
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
""",
    "example7.yaml": """\
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
""",
    "example9.yaml": """\
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
""",
}


def write_examples(tmp_dir):
    conf = tmp_dir / "ratelimit" / "config"
    conf.mkdir(parents=True)
    for name, text in EXAMPLES.items():
        (conf / name).write_text(text)
    return conf


def floodgate_config(conf, extra=""):
    return (f"envoy_ratelimit:\n  files: [{conf}]\n  response_headers: true\n" + extra)


def run_node(node, port):
    try:
        out = subprocess.run([node, "rls_test.js", str(port), ""], cwd=NODE_DIR,
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"rls_test.js did not finish within 120 s:\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, f"rls_test.js failed:\n{out.stdout}\n{out.stderr}"
    assert out.stdout.count("ok   ") == 9, out.stdout


def test_node_client_embedded_store(start_server, tmp_dir, node_ready, curl):
    server = start_server(floodgate_config(write_examples(tmp_dir)), grpc="127.0.0.1:0")
    assert server.grpc_port, server.listening
    assert server.listening.get("envoy_domains") == "6"
    run_node(node_ready, server.grpc_port)
    metrics = curl(f"http://127.0.0.1:{server.http_port}/metrics").body.decode()
    assert metric_value(metrics, "floodgate_grpc_requests_total",
                        {"code": "INVALID_ARGUMENT", "overall_code": ""}) == 2
    assert metric_value(metrics, "floodgate_envoy_descriptor_decisions_total",
                        {"domain": "example6", "descriptor": "service.user_user-a",
                         "outcome": "shadow_over_limit"}) == 5


def test_node_client_redis_store(start_server, tmp_dir, node_ready, redis_server):
    redis = redis_server()
    server = start_server(floodgate_config(write_examples(tmp_dir),
                                           "redis: { timeout_ms: 1000 }\n"),
                          grpc="127.0.0.1:0", extra_args=["--store", redis.url])
    run_node(node_ready, server.grpc_port)
    # The counts live in Redis, each key with a TTL.
    client = redis.client()
    keys = client.keys("fg:*")
    assert keys
    assert all(client.pttl(k) > 0 for k in keys)


def test_grpc_front_starts_with_envoy_files_only(start_server, tmp_dir):
    server = start_server("rules: { api: { algorithm: fixed_window, limits: [1/s] } }\n")
    assert server.listening.get("grpc") == ""
    conf = write_examples(tmp_dir)
    server = start_server(floodgate_config(conf), grpc="off")
    assert server.listening.get("grpc") == ""


def test_bad_envoy_file_fails_check_config_and_serve(floodgate_bin, tmp_dir):
    conf = tmp_dir / "rl.yaml"
    conf.write_text("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")
    config = tmp_dir / "f.yaml"
    config.write_text("envoy_ratelimit: [rl.yaml]\n")
    out = subprocess.run([str(floodgate_bin), "check-config", str(config)],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert f"{conf}:4:24: invalid rate limit unit 'fortnight'" in out.stderr, out.stderr
    out = subprocess.run([str(floodgate_bin), "serve", "--config", str(config), "--resp",
                          "127.0.0.1:0", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert "invalid rate limit unit" in out.stderr
    assert "msg=listening" not in out.stderr


def test_busy_grpc_port_exits_1(start_server, tmp_dir):
    import socket
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        port = holder.getsockname()[1]
        server = start_server(floodgate_config(write_examples(tmp_dir)),
                              grpc=f"127.0.0.1:{port}", wait_listening=False)
        assert server.wait_exit(10) == 1, server.stderr_text()
        assert re.search(r"cannot listen for gRPC", server.stderr_text())
    finally:
        holder.close()
