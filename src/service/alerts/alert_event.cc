// Alert ids, bodies and signatures: see alert_event.h.
#include "service/alerts/alert_event.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>
#include <utility>

#include "common/json_text.h"

namespace floodgate::service {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* data, size_t n) {
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 0xf];
  }
  return out;
}

// "<length>:<bytes>": a prefix-free encoding, so ("a:b", "c") and ("a",
// "b:c") cannot collide.
void AppendField(std::string* out, std::string_view field) {
  *out += std::to_string(field.size());
  *out += ':';
  out->append(field);
}

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// `"name":`, after a comma unless it is the object's first member.
void AppendName(std::string* out, std::string_view name) {
  if (out->back() != '{') *out += ',';
  *out += '"';
  out->append(name);
  *out += "\":";
}

void AppendString(std::string* out, std::string_view name, std::string_view value) {
  AppendName(out, name);
  *out += '"';
  json::AppendEscaped(out, value);
  *out += '"';
}

void AppendNumber(std::string* out, std::string_view name, int64_t value) {
  AppendName(out, name);
  AppendInt(out, value);
}

}  // namespace

std::string AlertEventId(std::string_view rule, std::string_view tier, std::string_view key,
                         int limit_index, int threshold, int64_t window_start_ms) {
  std::string in = "floodgate-alert-1|";
  AppendField(&in, rule);
  AppendField(&in, tier);
  AppendField(&in, key);
  AppendField(&in, std::to_string(limit_index));
  AppendField(&in, std::to_string(threshold));
  AppendField(&in, std::to_string(window_start_ms));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(in.data(), in.size(), digest, &size, EVP_sha256(), nullptr) != 1 || size < 16) {
    // Only a broken OpenSSL fails here. The input itself is unique: its
    // hex keeps the id deterministic, if long.
    return Hex(reinterpret_cast<const unsigned char*>(in.data()), in.size());
  }
  return Hex(digest, 16);
}

std::string AlertEventJson(const AlertEvent& e) {
  std::string out;
  out.reserve(256 + e.key.size() + e.rule.size());
  out += '{';
  AppendString(&out, "event_id", e.event_id);
  AppendString(&out, "rule", e.rule);
  AppendString(&out, "key", e.key);
  if (e.tier.empty()) {
    AppendName(&out, "tier");
    out += "null";
  } else {
    AppendString(&out, "tier", e.tier);
  }
  AppendString(&out, "limit", e.limit);
  const std::pair<std::string_view, int64_t> figures[] = {{"limit_index", e.limit_index},
                                                          {"capacity", e.capacity},
                                                          {"threshold", e.threshold},
                                                          {"used", e.used},
                                                          {"window_start", e.window_start_ms},
                                                          {"window_end", e.window_end_ms},
                                                          {"at", e.at_ms}};
  for (const auto& [name, value] : figures) AppendNumber(&out, name, value);
  out += '}';
  return out;
}

std::string AlertSignature(std::string_view secret, std::string_view body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac,
           &size) == nullptr) {
    return "sha256=";  // only a broken OpenSSL: the receiver refuses it, and says so
  }
  return "sha256=" + Hex(mac, size);
}

}  // namespace floodgate::service
