"""The Grafana dashboard (deploy/grafana/floodgate.json) against the metrics
floodgate exports.

Every metric name in every panel's PromQL expression and in every templating
query must be one a live floodgate serves at GET /metrics: a renamed or
removed metric, or a typo in the dashboard, fails here instead of leaving a
panel silently empty. The server runs on a real Redis with the gRPC front on,
so that the Redis store's and the Envoy front's metrics are there too, and
gets a little traffic first (checks admitted and denied, leases, sets, OTP);
an embedded one with a data_dir and one with listen_tls add the snapshot's
and the certificate's families.
The other way round, every metric family floodgate exports must be shown
by some panel.

The JSON is also checked as an importable dashboard: a uid and title, the
DS_PROMETHEUS input, the datasource, instance and rule variables, unique
panel ids, and every panel querying through the datasource variable.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import SOURCE_DIR, http_get, metric_value
from test_tls import make_certs

DASHBOARD = SOURCE_DIR / "deploy" / "grafana" / "floodgate.json"

CONFIG = """\
rules:
  api: { algorithm: gcra, limits: [3/minute], on_backend_error: deny }
  trial: { algorithm: gcra, limits: [1/minute], shadow: true, on_backend_error: deny }
  exports: { algorithm: concurrency, max_in_flight: 1, lease_ttl: 30s, on_backend_error: deny }
redis:
  timeout_ms: 2000
otp:
  secret_env: FG_OTP_SECRET
"""

OTP_SECRET = "grafana-test-secret-0123456789"

# --------------------------------------------------------------------------
# Metric names in PromQL

# PromQL's functions and aggregation operators: an identifier followed by "(".
PROMQL_FUNCTIONS = frozenset("""
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes
    clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
    days_in_month deg delta deriv double_exponential_smoothing exp floor histogram_avg
    histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
    histogram_sum holt_winters hour idelta increase info irate label_join label_replace
    last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute month pi
    predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin
    sinh sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
    stdvar_over_time sum_over_time tan tanh time timestamp vector year
    avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum
    topk
""".split())

# Keywords, binary set operators and modifiers: never metric names.
PROMQL_KEYWORDS = frozenset("""
    and or unless atan2 by without on ignoring group_left group_right bool offset start end
    inf nan
""".split())

STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
NAME_MATCHER_RE = re.compile(r'__name__\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING_RE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
TOKEN_RE = re.compile(
    r"(?<![\w.$:])(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|([A-Za-z_:][A-Za-z0-9_:]*))(\s*\()?")
IDENT_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: bare selectors (an
    identifier before "{", "[", ")" or whitespace that is no function,
    keyword or grouping label) and __name__ matchers ("=" or an "=~"
    alternation of plain names). Raises on what it cannot read, so that an
    expression it does not understand fails the test rather than passing
    unchecked."""
    names: set[str] = set()
    for op, value in NAME_MATCHER_RE.findall(expr):
        if op == "=" and IDENT_RE.fullmatch(value):
            names.add(value)
        elif op == "=~" and all(IDENT_RE.fullmatch(v) for v in value.split("|")):
            names.update(value.split("|"))
        else:
            raise ValueError(f"cannot check __name__{op}\"{value}\" in {expr!r}")
    text = STRING_RE.sub('""', expr)  # label values, $variables inside them
    text = re.sub(r"\{[^{}]*\}", "{}", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", "[]", text)  # ranges and subqueries ($__rate_interval)
    text = GROUPING_RE.sub(r"\1", text)  # by (rule), on (instance), group_left (x)
    for m in TOKEN_RE.finditer(text):
        number, ident, call = m.groups()
        if number is not None:
            continue
        if ident in PROMQL_FUNCTIONS or ident in PROMQL_KEYWORDS:
            continue
        if call:
            raise ValueError(f"unknown PromQL function {ident!r} in {expr!r}")
        names.add(ident)
    return names


def template_query_text(var: dict) -> str:
    query = var.get("query", "")
    if isinstance(query, dict):
        query = query.get("query", "")
    return query


def variable_metric_names(query: str) -> set[str]:
    """The metric names a Grafana Prometheus variable query uses:
    label_values(selector, label), label_values(label), query_result(expr)."""
    query = query.strip()
    m = re.fullmatch(r"label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)", query, re.S)
    if m:
        return promql_metric_names(m.group(1))
    if re.fullmatch(r"label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)", query):
        return set()
    m = re.fullmatch(r"query_result\((.*)\)", query, re.S)
    if m:
        return promql_metric_names(m.group(1))
    raise ValueError(f"cannot read the variable query {query!r}")


def all_panels(dashboard: dict) -> list[dict]:
    """Every panel, those inside collapsed rows included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def dashboard_metric_names(dashboard: dict) -> dict[str, set[str]]:
    """Metric name -> where it is used ("panel 'title' A", "variable rule")."""
    used: dict[str, set[str]] = {}
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            where = f"panel {panel.get('title')!r} {target.get('refId')}"
            for name in promql_metric_names(target["expr"]):
                used.setdefault(name, set()).add(where)
    for var in dashboard["templating"]["list"]:
        if var.get("type") != "query":
            continue
        for name in variable_metric_names(template_query_text(var)):
            used.setdefault(name, set()).add(f"variable {var['name']}")
    return used


# --------------------------------------------------------------------------
# Metric names in the exposition

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_metrics(text: str) -> tuple[dict[str, str], set[str]]:
    """The families ({name: type} from # TYPE, and # HELP names as "untyped")
    and the sample names of a Prometheus text exposition."""
    families: dict[str, str] = {}
    samples: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            families[parts[2]] = parts[3] if len(parts) > 3 else "untyped"
        elif line.startswith("# HELP "):
            families.setdefault(line.split()[2], "untyped")
        elif line and not line.startswith("#"):
            m = IDENT_RE.match(line)
            if m:
                samples.add(m.group(0))
    return families, samples


def is_exported(name: str, families: dict[str, str], samples: set[str]) -> bool:
    if name in samples or name in families:
        return True
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return families.get(name[: -len(suffix)]) in ("histogram", "summary")
    return False


def missing_metrics(names, text: str) -> list[str]:
    families, samples = exported_metrics(text)
    return sorted(n for n in names if not is_exported(n, families, samples))


def family_of(name: str, families: dict[str, str]) -> str:
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and families.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return name[: -len(suffix)]
    return name


@pytest.fixture(scope="module")
def dashboard() -> dict:
    with open(DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------
# The extractor itself


def test_extractor_reads_promql():
    assert promql_metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{x="y", i=~"$instance"}'
        "[$__rate_interval])))") == {"a_seconds_bucket"}
    assert promql_metric_names(
        "sum without (instance) (b_total) / on (rule) group_left (tier) c offset 5m "
        "and d[5m:1m] > 1e-3 unless e{}") == {"b_total", "c", "d", "e"}
    assert promql_metric_names('count({__name__=~"f_total|g", rule="sum"})') == {"f_total", "g"}
    assert promql_metric_names('sum(rate(h_total{kind="rate(x)"}[1m])) * 100') == {"h_total"}
    assert variable_metric_names(
        'label_values({__name__=~"a|b", instance=~"$instance"}, rule)') == {"a", "b"}
    assert variable_metric_names("label_values(c_total, instance)") == {"c_total"}
    assert variable_metric_names("label_values(instance)") == set()
    with pytest.raises(ValueError):
        promql_metric_names("no_such_function(x)")
    with pytest.raises(ValueError):
        promql_metric_names('{__name__=~"floodgate_.*"}')


def test_missing_metrics_are_reported():
    text = ("# HELP fg_x_seconds x\n# TYPE fg_x_seconds histogram\n"
            'fg_x_seconds_bucket{le="+Inf"} 1\nfg_x_seconds_sum 1\nfg_x_seconds_count 1\n'
            "# TYPE fg_y_total counter\n")
    assert missing_metrics(["fg_x_seconds_bucket", "fg_x_seconds_sum", "fg_y_total"], text) == []
    assert missing_metrics(["fg_y_total_bucket", "fg_x_second", "fg_z"], text) == [
        "fg_x_second", "fg_y_total_bucket", "fg_z"]


# --------------------------------------------------------------------------
# The dashboard


def test_dashboard_is_an_importable_dashboard(dashboard):
    assert dashboard["uid"] == "floodgate"
    assert dashboard["title"] == "floodgate"
    assert dashboard.get("id") is None, "an exported dashboard has no database id"
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36

    inputs = {i["name"]: i for i in dashboard["__inputs"]}
    assert inputs["DS_PROMETHEUS"]["type"] == "datasource"
    assert inputs["DS_PROMETHEUS"]["pluginId"] == "prometheus"

    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == "${DS_PROMETHEUS}"
    for name in ("instance", "rule"):
        var = variables[name]
        assert var["type"] == "query", name
        assert var["datasource"]["uid"] == "${datasource}", name
        assert template_query_text(var).startswith("label_values("), name
        assert template_query_text(var).endswith(f", {name})"), name

    panels = all_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    rows = [p for p in panels if p["type"] == "row"]
    assert len(rows) >= 8, [r["title"] for r in rows]
    queried = [p for p in panels if p["type"] != "row"]
    assert len(queried) >= 30
    for panel in queried:
        title = panel["title"]
        assert title and panel.get("description"), f"panel {panel['id']} needs a title and a description"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel["targets"], title
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), title
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", title
            assert 'instance=~"$instance"' in target["expr"], (title, target["expr"])
            assert "floodgate_" in target["expr"], (title, target["expr"])
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, (title, pos)


def test_dashboard_file_is_formatted(dashboard):
    text = DASHBOARD.read_text(encoding="utf-8")
    assert text == json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n", (
        "deploy/grafana/floodgate.json is not formatted as json.dumps(indent=2) with a final newline")


# --------------------------------------------------------------------------
# Against a live floodgate


def test_every_metric_the_dashboard_uses_is_exported(start_server, redis_server, curl, dashboard,
                                                     tmp_dir):
    used = dashboard_metric_names(dashboard)
    assert len(used) >= 10, f"the extractor found only {sorted(used)}"
    assert all(n.startswith("floodgate_") for n in used), sorted(used)

    backend = redis_server()
    server = start_server(CONFIG, extra_args=["--store", backend.url], grpc="127.0.0.1:0",
                          env={"FG_OTP_SECRET": OTP_SECRET})
    base = f"http://127.0.0.1:{server.http_port}"
    statuses = [curl(f"{base}/v1/check", method="POST", data='{"rule":"api","key":"k"}').status
                for _ in range(5)]
    assert 200 in statuses and 429 in statuses, statuses
    for _ in range(2):
        assert curl(f"{base}/v1/check", method="POST", data='{"rule":"trial","key":"k"}').status == 200
    assert curl(f"{base}/v1/check", method="POST", data='{"rule":"nope","key":"k"}').status == 404
    lease = curl(f"{base}/v1/leases", method="POST", data='{"rule":"exports","key":"k"}')
    assert lease.status == 200, lease
    refused = curl(f"{base}/v1/leases", method="POST",
                   data='{"rule":"exports","key":"k","wait_ms":20}')
    assert refused.status == 429, refused
    assert curl(f"{base}/v1/sets/s", method="POST", data='{"member":"m","ttl_ms":60000}').status == 200
    assert curl(f"{base}/v1/otp/issue", method="POST", data='{"subject":"s"}').status == 200

    metrics = http_get(server.http_port, "/metrics")
    assert metrics.status == 200
    text = metrics.body.decode()
    # The state snapshot's families come from an embedded store with a
    # data_dir (a Redis store keeps its state in Redis).
    embedded = start_server(CONFIG + f"data_dir: {tmp_dir / 'state'}\n",
                            env={"FG_OTP_SECRET": OTP_SECRET})
    snapshot = http_get(embedded.http_port, "/metrics")
    assert snapshot.status == 200
    snapshot_text = snapshot.body.decode()
    assert metric_value(snapshot_text, "floodgate_snapshots_total", {"result": "ok"}) == 0
    text += "".join(line + "\n" for line in snapshot_text.splitlines()
                    if "floodgate_snapshot" in line)
    # The certificate's families come from a server with listen_tls.
    certs = tmp_dir / "tls"
    certs.mkdir()
    make_certs(certs)
    tls = start_server(f"tls: {{ cert_file: {certs / 'server.pem'}, "
                       f"key_file: {certs / 'server.key'} }}\nlisten_tls: {{ resp: true }}\n"
                       + CONFIG, env={"FG_OTP_SECRET": OTP_SECRET})
    tls_text = http_get(tls.http_port, "/metrics").body.decode()
    assert metric_value(tls_text, "floodgate_tls_reloads_total", {"result": "ok"}) == 0
    text += "".join(line + "\n" for line in tls_text.splitlines()
                    if "floodgate_tls_reloads" in line or "floodgate_tls_certificate" in line)
    # The traffic arrived, so the rule-labelled series the variables read exist.
    assert metric_value(text, "floodgate_decisions_total", {"rule": "api", "outcome": "allowed"}) >= 1
    assert metric_value(text, "floodgate_decisions_total", {"rule": "api", "outcome": "denied"}) >= 1
    assert metric_value(text, "floodgate_leases_held", {"rule": "exports"}) == 1

    missing = missing_metrics(used, text)
    assert not missing, "the dashboard uses metrics floodgate does not export:\n" + "\n".join(
        f"  {n}: {', '.join(sorted(used[n]))}" for n in missing)
    # The check can fail: a made-up name is reported.
    assert missing_metrics([*used, "floodgate_no_such_metric_total"], text) == [
        "floodgate_no_such_metric_total"]

    families, _ = exported_metrics(text)
    shown = {family_of(n, families) for n in used}
    unshown = sorted(set(families) - shown)
    assert not unshown, ("metrics floodgate exports that no panel of deploy/grafana/floodgate.json "
                         f"shows: {unshown}")
