// The subjects room: see subjects.h.
#include "service/subjects/subjects.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "common/text.h"
#include "service/lists/cidr_list_file.h"
#include "service/subjects/client_address.h"
#include "service/subjects/subject_key.h"

namespace floodgate::service {
namespace {

// A header's lines joined by ",", as one list (X-Forwarded-For, Forwarded).
// Whole: the right end is what the nearest proxy wrote, so no cut may drop
// it, and the request's head is already bounded (8 KiB by default).
std::string JoinedHeader(const RequestView& request, std::string_view name) {
  std::string joined;
  request.ForEachHeader(name, [&](std::string_view line) {
    if (!joined.empty()) joined += ',';
    joined.append(line);
  });
  return joined;
}

Result<std::shared_ptr<const JwtVerifier>> OpenJwt(const JwtConfig& config) {
  JwtOptions options;
  options.jwks_file = config.jwks_file;
  options.issuer = config.issuer;
  options.audience = config.audience;
  options.leeway_s = config.leeway_ms / 1000;
  options.hs256_secret = config.hs256_secret;
  if (options.hs256_secret.empty() && !config.hs256_secret_env.empty()) {
    const char* secret = std::getenv(config.hs256_secret_env.c_str());
    if (secret == nullptr || *secret == '\0') {
      return InvalidArgumentError("jwt: hs256_secret_env names " + config.hs256_secret_env +
                                  ", which is not set");
    }
    options.hs256_secret = secret;
  }
  return JwtVerifier::Open(options);
}

}  // namespace

Result<std::shared_ptr<const SubjectRules>> SubjectRules::Build(const Config& config) {
  std::shared_ptr<SubjectRules> out(new SubjectRules());
  Result<CidrSet> trusted = BuildCidrList(config.server.trusted_proxies, "server.trusted_proxies");
  if (!trusted.ok()) return trusted.status();
  out->trusted_ = *std::move(trusted);
  for (const ListConfig& l : config.lists) {
    Result<CidrSet> set = l.file.empty() ? BuildCidrList(l.cidrs, "lists." + l.name + ".cidrs")
                                         : LoadCidrListFile(l.file);
    if (!set.ok()) return set.status();
    auto list = std::make_unique<NetworkList>();
    list->name = l.name;
    list->source = l.file.empty() ? "inline" : l.file;
    list->networks = *std::move(set);
    out->lists_.push_back(std::move(list));
  }
  if (config.jwt.in_file) {
    Result<std::shared_ptr<const JwtVerifier>> jwt = OpenJwt(config.jwt);
    if (!jwt.ok()) return jwt.status();
    out->jwt_ = *std::move(jwt);
    out->jwt_header_ = config.jwt.header;
  }
  auto list_named = [&](const std::string& name) -> const NetworkList* {
    for (const auto& l : out->lists_) {
      if (l->name == name) return l.get();
    }
    return nullptr;
  };
  for (const Rule& rule : config.rules) {
    const SubjectConfig& s = rule.subject;
    if (!s.any()) continue;
    RuleSubject r;
    r.rule = rule.name;
    r.on_missing = s.on_missing;
    if (!s.key.empty()) {
      Result<KeyTemplate> t = ParseKeyTemplate(s.key);
      if (!t.ok()) {
        return InvalidArgumentError("rule '" + rule.name + "': key: " + t.status().message());
      }
      r.key = *std::move(t);
      if (r.key->uses_jwt() && out->jwt_ == nullptr) {
        return InvalidArgumentError("rule '" + rule.name + "': key '" + s.key +
                                    "' reads a token ({jwt:...}) and the config has no 'jwt:'");
      }
    }
    for (auto [name, target] : {std::pair{&s.deny_list, &r.deny}, {&s.allow_list, &r.allow}}) {
      if (name->empty()) continue;
      *target = list_named(*name);
      if (*target == nullptr) {
        return InvalidArgumentError("rule '" + rule.name + "': '" + *name +
                                    "' is not a list of 'lists:'");
      }
      out->any_lists_ = true;
    }
    out->rules_.emplace(rule.name, std::move(r));
  }
  return std::shared_ptr<const SubjectRules>(std::move(out));
}

const RuleSubject* SubjectRules::Of(std::string_view rule) const {
  const auto it = rules_.find(absl::string_view(rule.data(), rule.size()));
  return it == rules_.end() ? nullptr : &it->second;
}

namespace {
std::atomic<uint64_t> next_room_id{1};
}  // namespace

Subjects::Subjects()
    : id_(next_room_id.fetch_add(1, std::memory_order_relaxed)),
      rules_(std::make_shared<const SubjectRules>()) {}

void Subjects::Publish(std::shared_ptr<const SubjectRules> rules) {
  if (rules == nullptr) rules = std::make_shared<const SubjectRules>();
  const bool active = !rules->empty();
  {
    std::lock_guard<std::mutex> lock(mu_);
    rules_ = std::move(rules);
    version_.fetch_add(1, std::memory_order_release);
  }
  active_.store(active, std::memory_order_relaxed);
}

const SubjectRules& Subjects::ForThisThread() const {
  thread_local uint64_t room = 0;
  thread_local uint64_t seen = 0;
  thread_local std::shared_ptr<const SubjectRules> held;
  const uint64_t version = version_.load(std::memory_order_acquire);
  if (room != id_ || seen != version || held == nullptr) {
    held = Current();
    room = id_;
    seen = version;
  }
  return *held;
}

std::shared_ptr<const SubjectRules> Subjects::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rules_;
}

void Subjects::CountMatch(const NetworkList& list, std::string_view rule, bool deny) {
  std::lock_guard<std::mutex> lock(counts_mu_);
  ++counts_.list_matches[{list.name, std::string(rule), deny ? "deny" : "allow"}];
}

void Subjects::CountMissing(std::string_view rule, const KeyPart& part) {
  std::lock_guard<std::mutex> lock(counts_mu_);
  // As the answer names it: "header:x-api-key".
  ++counts_.missing[{std::string(rule), part.written.substr(1, part.written.size() - 2)}];
}

Subjects::Counts Subjects::GetCounts() const {
  Counts c;
  {
    std::lock_guard<std::mutex> lock(counts_mu_);
    c = counts_;
  }
  for (size_t i = 0; i < jwt_rejected_.size(); ++i) {
    c.jwt_rejected[i] = jwt_rejected_[i].load(std::memory_order_relaxed);
  }
  return c;
}

SubjectAnswer Subjects::Lists(const RuleSubject& r, const IpAddress& address) {
  SubjectAnswer a;
  a.address = address;
  if (r.deny != nullptr && r.deny->networks.Contains(address)) {
    CountMatch(*r.deny, r.rule, true);
    a.kind = SubjectAnswer::Kind::kDenyListed;
    a.list = r.deny;
  } else if (r.allow != nullptr && r.allow->networks.Contains(address)) {
    CountMatch(*r.allow, r.rule, false);
    a.kind = SubjectAnswer::Kind::kAllowListed;
    a.list = r.allow;
  }
  return a;
}

SubjectAnswer Subjects::ResolveKey(const SubjectRules& rules, std::string_view rule,
                                   std::string_view key) {
  const RuleSubject* r = rules.Of(rule);
  if (r == nullptr || (r->deny == nullptr && r->allow == nullptr)) return {};
  const std::optional<IpAddress> address = IpAddress::Parse(key);
  if (!address) return {};
  return Lists(*r, *address);
}

SubjectAnswer Subjects::Resolve(const SubjectRules& rules, std::string_view rule,
                                std::string_view given, const RequestView& request, int64_t now_ms,
                                std::string* key) {
  const RuleSubject* r = rules.Of(rule);
  key->clear();
  if (!given.empty() || r == nullptr || !r->key.has_value()) {
    if (given.empty()) {
      SubjectAnswer none;
      none.kind = SubjectAnswer::Kind::kNoKey;
      return none;
    }
    key->assign(given);
    return r == nullptr ? SubjectAnswer{} : ResolveKey(rules, rule, given);
  }
  const IpAddress peer = request.peer();
  const bool trusted = rules.trusted_proxies().Contains(peer);
  IpAddress client = peer;
  if (trusted) {
    const std::string xff = JoinedHeader(request, "x-forwarded-for");
    const std::string forwarded = xff.empty() ? JoinedHeader(request, "forwarded") : std::string();
    client = ClientAddress(peer, rules.trusted_proxies(), {xff, forwarded});
  }
  SubjectAnswer a = Lists(*r, client);
  if (a.kind != SubjectAnswer::Kind::kCheck) return a;

  JwtClaims claims;
  const JwtClaims* verified = nullptr;
  if (r->key->uses_jwt() && rules.jwt() != nullptr) {
    if (const std::string_view token = BearerTokenOf(request, rules.jwt_header()); !token.empty()) {
      JwtReason why = JwtReason::kMalformed;
      Result<JwtClaims> c = rules.jwt()->Verify(token, now_ms / 1000, &why);
      if (c.ok()) {
        claims = *std::move(c);
        verified = &claims;
      } else {
        jwt_rejected_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  const OriginalRequest original = OriginalOf(request, trusted);
  const KeyPart* missing = BuildKey(*r->key, {request, client, original, verified}, key);
  if (missing != nullptr) {
    a.kind = SubjectAnswer::Kind::kMissing;
    a.missing = missing;
    a.on_missing = r->on_missing;
    key->clear();
  }
  return a;
}

std::string_view BearerTokenOf(const RequestView& request, std::string_view header) {
  std::string_view v = request.Header(header);
  if (v.size() < 7 || !text::EqualsIgnoreCase(v.substr(0, 7), "bearer ")) return {};
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

}  // namespace floodgate::service
