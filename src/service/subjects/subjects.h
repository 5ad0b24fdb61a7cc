// Subjects: who a check is about when the request says so
// (docs/keys-from-requests.md). For each rule with a `key` template, a
// `deny_list` or an `allow_list`, this room turns a request into the
// subject's key and into the verdict of the rule's lists, from the
// config's trusted proxies, lists and JWT verifier.
//
// Contract:
//  - Built whole from a config (SubjectRules::Build): every list file, the
//    JWKS file and the HS256 secret are read then, so a bad one fails the
//    build (check-config, start, reload) naming where it is. A reload
//    builds first and publishes only what built: a broken list file keeps
//    the old lists serving.
//  - Resolve: the address a check is about is, for a rule with a template
//    and no key given, the client's (client_address.h); with a key given,
//    the key itself when it is an IP address; else there is none and the
//    lists do not apply. The deny list is tested first (a deny-listed
//    partner is denied), then the allow list; then the template builds the
//    key. A key given is used as given, as on every other front.
//  - A {jwt:...} part reads the claims of the "Bearer" token of
//    Authorization (or jwt.header), verified once per request; a token that fails is no token
//    (each part missing), counted by its reason.
//  - Counts: list matches per (list, rule, action), missing parts per
//    (rule, part), refused tokens per reason, for /metrics.
//
// Thread-safe. A decision reads the published rules with one relaxed load
// while no rule has a subject config (active()), and with one more acquire
// load when one has (ForThisThread).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/ip_address.h"
#include "common/key_template.h"
#include "floodgate/config.h"
#include "floodgate/status.h"
#include "service/lists/cidr_set.h"
#include "service/subjects/jwt_verifier.h"
#include "service/subjects/request_view.h"

namespace floodgate::service {

struct NetworkList {
  std::string name;
  std::string source;  // the file, or "inline"
  CidrSet networks;
};

// One rule's subject config, compiled.
struct RuleSubject {
  std::string rule;
  std::optional<KeyTemplate> key;  // has_value: built from the request
  OnMissing on_missing = OnMissing::kError;
  const NetworkList* deny = nullptr;
  const NetworkList* allow = nullptr;
};

// What the config says, read and compiled: immutable once built.
class SubjectRules {
 public:
  // None: no rule reads the request, no list.
  SubjectRules() = default;
  // Reads the config's list files and JWKS file and the HS256 secret's
  // variable (unless config.jwt.hs256_secret is set). Errors name the
  // field or the file:line.
  static Result<std::shared_ptr<const SubjectRules>> Build(const Config& config);

  // The rule's compiled subject config, or null when it has none.
  const RuleSubject* Of(std::string_view rule) const;
  bool empty() const { return rules_.empty(); }
  bool any_lists() const { return any_lists_; }
  const std::vector<std::unique_ptr<NetworkList>>& lists() const { return lists_; }
  const CidrSet& trusted_proxies() const { return trusted_; }
  const JwtVerifier* jwt() const { return jwt_.get(); }
  // The field a token comes in (JwtConfig::header).
  const std::string& jwt_header() const { return jwt_header_; }

 private:
  std::vector<std::unique_ptr<NetworkList>> lists_;
  absl::flat_hash_map<std::string, RuleSubject> rules_;
  CidrSet trusted_;
  std::shared_ptr<const JwtVerifier> jwt_;
  std::string jwt_header_ = "authorization";
  bool any_lists_ = false;
};

// What a check's subject comes to.
struct SubjectAnswer {
  enum class Kind {
    kCheck,        // check `key` (the one given, or the one built)
    kDenyListed,   // deny: `list` holds the address
    kAllowListed,  // admit unchecked: `list` holds the address
    kMissing,      // `missing` is absent from the request: the rule's on_missing
    kNoKey,        // no key given and the rule has no template
  };
  Kind kind = Kind::kCheck;
  const NetworkList* list = nullptr;
  const KeyPart* missing = nullptr;
  OnMissing on_missing = OnMissing::kError;
  // The address tested against the lists (none: nullopt).
  std::optional<IpAddress> address;
};

class Subjects {
 public:
  Subjects();

  // Publishes `rules` (built by SubjectRules::Build) for the checks from now.
  void Publish(std::shared_ptr<const SubjectRules> rules);
  // Whether any rule has a subject config: one relaxed load.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  std::shared_ptr<const SubjectRules> Current() const;
  // The same for a decision: this thread's copy, taken again only after a
  // Publish (one acquire load otherwise, no lock, no shared count). Valid
  // until this thread's next call.
  const SubjectRules& ForThisThread() const;

  // The subject of one HTTP check of `rule` with key `given` ("" : none),
  // from `request`, at now_ms; the key goes to *key (given or built). The
  // rules held by `keep` must stay alive while the answer's pointers are
  // read.
  SubjectAnswer Resolve(const SubjectRules& rules, std::string_view rule, std::string_view given,
                        const RequestView& request, int64_t now_ms, std::string* key);
  // The lists' verdict for a check whose key was given on a front that
  // has no request to read (RESP, gRPC): the key when it is an IP address.
  // kCheck when no list holds it (or the rule has none).
  SubjectAnswer ResolveKey(const SubjectRules& rules, std::string_view rule, std::string_view key);

  struct Counts {
    // (list, rule, "deny" | "allow") -> matches
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> list_matches;
    // (rule, part as written) -> checks answered without a key
    std::map<std::pair<std::string, std::string>, int64_t> missing;
    // JwtReason -> tokens refused
    std::array<int64_t, 8> jwt_rejected{};
  };
  Counts GetCounts() const;
  // A missing part answered by the rule's on_missing; the fronts count it
  // here as they answer it.
  void CountMissing(std::string_view rule, const KeyPart& part);

 private:
  SubjectAnswer Lists(const RuleSubject& r, const IpAddress& address);
  void CountMatch(const NetworkList& list, std::string_view rule, bool deny);

  std::atomic<bool> active_{false};
  // Tells this room's publications from another's (a test's), for the
  // threads' copies: unique per room and per Publish.
  const uint64_t id_;
  std::atomic<uint64_t> version_{0};
  mutable std::mutex mu_;
  std::shared_ptr<const SubjectRules> rules_;  // guarded by mu_
  mutable std::mutex counts_mu_;
  Counts counts_;  // guarded by counts_mu_
  std::array<std::atomic<int64_t>, 8> jwt_rejected_{};
};

// The token of a "Bearer <token>" field named `header` (lower-cased), or "".
std::string_view BearerTokenOf(const RequestView& request, std::string_view header);

}  // namespace floodgate::service
