// Quota alerts in the config (docs/alerts.md): a rule's `alerts` block
// (thresholds in percent, the webhook, the variable holding its signing
// secret) and the `alert_delivery` section (queue, workers, retries and
// back-off, the spool file, the Redis stream's bounds). Each returns the
// first error, worded as yaml_fields.h words them. The file names the
// secret's variable, never the secret.
#pragma once

#include <string>

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// A rule's `alerts`; `path` is its dotted name in messages
// ("rules.api.alerts"). Thresholds and a webhook are required.
Status ParseRuleAlerts(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                       const std::string& path, AlertConfig& alerts);
// Also checks that backoff_initial does not exceed backoff_max.
Status ParseAlertDelivery(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                          AlertDeliveryConfig& delivery);

}  // namespace floodgate::config
