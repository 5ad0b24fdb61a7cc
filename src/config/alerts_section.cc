// Quota alerts: a rule's `alerts` and `alert_delivery` (alerts_section.h).
#include "config/alerts_section.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace floodgate::config {
namespace {

// Percentages 1..100, strictly increasing: one threshold or a list.
Status ParseThresholds(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& field, std::vector<int>& out) {
  std::vector<YAML::Node> nodes;
  if (value.IsSequence()) {
    for (const YAML::Node& item : value) nodes.push_back(item);
  } else if (value.IsScalar()) {
    nodes.push_back(value);
  } else {
    return fields.WrongType(key, value, field, "a percentage or a list of them");
  }
  if (nodes.empty())
    return fields.FailAt(key, value, "'" + field + "' is an empty list", key.Scalar());
  for (const YAML::Node& node : nodes) {
    if (out.size() == static_cast<size_t>(kMaxAlertThresholds)) {
      return fields.Fail(node.Mark(),
                         "'" + field + "' has too many thresholds (at most " +
                             std::to_string(kMaxAlertThresholds) + ")",
                         node.IsScalar() ? node.Scalar() : key.Scalar());
    }
    Result<int64_t> pct = fields.Int(key, node, field, 1, 100);
    if (!pct.ok()) return pct.status();
    if (!out.empty() && *pct <= out.back()) {
      return fields.Fail(node.Mark(), "'" + field + "' must be in increasing order, each once",
                         node.Scalar());
    }
    out.push_back(static_cast<int>(*pct));
  }
  return Status::Ok();
}

}  // namespace

// Messages never quote a secret: the file names a variable, never a value.
Status ParseRuleAlerts(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& path, AlertConfig& alerts) {
  if (!value.IsMap()) {
    return fields.WrongType(key, value, path, "a map with thresholds and a webhook");
  }
  bool has_thresholds = false, has_webhook = false;
  Status s = fields.ForEachEntry(
      value, "key",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        const std::string field = path + "." + name;
        if (name == "thresholds") {
          has_thresholds = true;
          return ParseThresholds(fields, k, v, field, alerts.thresholds);
        }
        if (name == "webhook") {
          Result<std::string> url = fields.HttpUrl(k, v, field);
          if (!url.ok()) return url.status();
          alerts.webhook = *std::move(url);
          has_webhook = true;
          return Status::Ok();
        }
        if (name == "secret_env") {
          Result<std::string> variable = fields.EnvironmentVariable(k, v, field);
          if (!variable.ok()) return variable.status();
          alerts.secret_env = *std::move(variable);
          return Status::Ok();
        }
        if (name == "secret") {
          return fields.Fail(k.Mark(),
                             "the webhook secret does not go in the file: put it in an environment "
                             "variable and name that with '" +
                                 path + ".secret_env'",
                             name);
        }
        return fields.Fail(k.Mark(),
                           "unknown key '" + name + "' in " + path +
                               "; expected thresholds, webhook or secret_env",
                           name);
      });
  if (!s.ok()) return s;
  if (!has_thresholds) {
    return fields.Fail(key.Mark(), "'" + path + "' needs thresholds, e.g. [80, 100]", "alerts");
  }
  if (!has_webhook) {
    return fields.Fail(key.Mark(), "'" + path + "' needs a webhook (http://host:port/path)",
                       "alerts");
  }
  return Status::Ok();
}

Status ParseAlertDelivery(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                          AlertDeliveryConfig& delivery) {
  Status s = fields.ForEachInSection(
      key, value, "alert_delivery",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        const std::string field = "alert_delivery." + name;
        struct IntField {
          const char* name;
          int64_t min, max;
          int64_t* target;
        };
        int64_t workers = delivery.workers;
        const IntField ints[] = {
            {"queue_size", 1, 10'000'000, &delivery.queue_size},
            {"workers", 1, 64, &workers},
            {"timeout_ms", 1, 60'000, &delivery.timeout_ms},
            {"recent", 1, 10'000, &delivery.recent},
            {"stream_max_len", 100, 100'000'000, &delivery.stream_max_len},
        };
        for (const IntField& f : ints) {
          if (name != f.name) continue;
          Result<int64_t> n = fields.Int(k, v, field, f.min, f.max);
          if (!n.ok()) return n.status();
          *f.target = *n;
          delivery.workers = static_cast<int>(workers);
          return Status::Ok();
        }
        struct DurationField {
          const char* name;
          int64_t min_ms, max_ms;
          int64_t* target;
        };
        const DurationField durations[] = {
            {"retry_for", 1, 30 * kDayMs, &delivery.retry_for_ms},
            {"backoff_initial", 1, kDayMs, &delivery.backoff_initial_ms},
            {"backoff_max", 1, kDayMs, &delivery.backoff_max_ms},
            {"claim_after", 1000, kDayMs, &delivery.claim_after_ms},
        };
        for (const DurationField& f : durations) {
          if (name != f.name) continue;
          Result<int64_t> ms = fields.Duration(k, v, field, f.min_ms, f.max_ms);
          if (!ms.ok()) return ms.status();
          *f.target = *ms;
          return Status::Ok();
        }
        if (name == "spool") {
          Result<std::string> path = fields.String(k, v, field);
          if (!path.ok()) return path.status();
          if (path->empty()) return fields.FailAt(k, v, "'" + field + "' must be a file path", "");
          delivery.spool = *std::move(path);
          return Status::Ok();
        }
        return fields.Fail(k.Mark(),
                           "unknown key '" + name +
                               "' in alert_delivery; expected queue_size, workers, timeout_ms, "
                               "retry_for, backoff_initial, backoff_max, spool, recent, "
                               "stream_max_len or claim_after",
                           name);
      });
  if (!s.ok()) return s;
  if (delivery.backoff_initial_ms > delivery.backoff_max_ms) {
    return fields.Fail(
        key.Mark(), "'alert_delivery.backoff_initial' must not exceed 'alert_delivery.backoff_max'",
        "alert_delivery");
  }
  return Status::Ok();
}

}  // namespace floodgate::config
