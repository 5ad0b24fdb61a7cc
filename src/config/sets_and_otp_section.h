// The feature stores' sections of the config (docs/sets-and-otp.md):
// expiring sets' bounds (`sets`) and one-time passwords (`otp`: digits, TTL,
// issue and verify limits, live codes, the secret's variable, and the
// optional `delivery` webhook). Each reads its section's value into its
// part of the Config and returns the first error, worded as yaml_fields.h
// words them. The file names the OTP secret's variable, never the secret.
#pragma once

#include "config/yaml_fields.h"
#include "floodgate/config.h"
#include "yaml-cpp/yaml.h"

namespace floodgate::config {

// Marks the section as present (SetsConfig::in_file), even when empty.
Status ParseSets(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                 SetsConfig& sets);
// Enables OTP (OtpConfig::enabled); `otp:` alone takes every default.
Status ParseOtp(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                OtpConfig& otp);

}  // namespace floodgate::config
