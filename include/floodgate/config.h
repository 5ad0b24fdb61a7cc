// The YAML configuration file, parsed and validated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/rule.h"
#include "floodgate/status.h"

namespace floodgate {

// Each: host:port, or "off" (that front does not listen).
struct ListenConfig {
  std::string http = "127.0.0.1:8080";
  std::string resp = "127.0.0.1:6479";
  std::string grpc = "127.0.0.1:8081";

  friend bool operator==(const ListenConfig&, const ListenConfig&) = default;
};

// TLS on the listeners (docs/operations.md, "TLS"): the server's
// certificate chain and key (PEM), and for mTLS the CAs client certificates
// must chain to. Read at start, and again on SIGHUP; a bad new file keeps
// the old ones.
struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // empty: no client certificate asked
  bool require_client_cert = false;
  bool enabled() const { return !cert_file.empty(); }

  friend bool operator==(const TlsConfig&, const TlsConfig&) = default;
};

// Which fronts speak TLS on their listen address (each needs `tls`).
struct ListenTlsConfig {
  bool resp = false;
  bool http = false;
  bool grpc = false;
  bool any() const { return resp || http || grpc; }

  friend bool operator==(const ListenTlsConfig&, const ListenTlsConfig&) = default;
};

// Tuning of the embedded store.
//
// Two bounds on what the store holds, both hard: past either, a new subject
// of a rule is decided by the rule's on_store_full (a decision marked
// store_full, counted), a new set or OTP subject is refused with
// RESOURCE_EXHAUSTED, and subjects already held keep working. Expired
// entries are reclaimed before a new one is refused.
struct EngineConfig {
  // Live entries: (rule, subject) states, sets, OTP subjects.
  int64_t max_entries = 10'000'000;
  // Bytes of the entries (each one allocation: header, key, state), of
  // what their states own beside them (sliding_log's event logs, sets'
  // members, OTP codes and events, lease tables) and of the tables' slot
  // arrays, as the allocator counts them. A new subject, or the growth of a
  // known one's state, that would pass it is refused. 1 GiB holds the
  // default max_entries of small keys (about 70 bytes each) with room to
  // spare, and about 1.9 million subjects at the longest key (512 bytes): a
  // flood of long keys meets this bound first.
  int64_t max_memory = int64_t{1} << 30;
  // Number of independently locked shards; a power of two.
  int shards = 256;
  // How often the background sweep frees expired entries.
  int64_t sweep_interval_ms = 1000;

  friend bool operator==(const EngineConfig&, const EngineConfig&) = default;
};

// Tuning of the Redis store (any store URL but "memory").
struct RedisConfig {
  // A decision Redis has not answered within this long is answered by the
  // rule's on_backend_error.
  int64_t timeout_ms = 20;
  int64_t connect_timeout_ms = 500;
  int connections_per_node = 2;  // per I/O thread, and per server event loop
  // Threads running the Redis I/O of requests made off a server event loop
  // (the library's blocking API, floodgate audit). Each event loop of
  // `floodgate serve` runs its own connections (Limiter::NewLoopDriver).
  int io_threads = 1;
  // Subjects Redis denied until T are denied here until T without asking
  // Redis again (never admits what Redis would deny).
  bool local_cache = true;
  int64_t local_cache_max_entries = 100'000;

  friend bool operator==(const RedisConfig&, const RedisConfig&) = default;
};

// The server process (`floodgate serve`). Every bound below is documented,
// with the reason for its default, in docs/operations.md. A timeout of 0
// is off.
struct ServerConfig {
  int threads = 0;  // event loops, and as many gRPC threads; 0: automatic (docs/operations.md)
  // Open connections across both fronts. At the bound a new connection
  // evicts the longest-idle one (nothing in progress); with none idle it
  // is refused.
  int64_t max_connections = 10'000;
  int64_t max_connections_per_ip = 0;  // per client address; 0: no bound
  // HTTP: a request (headers and body) must be complete this long after
  // its first byte (408, then close); a keep-alive connection idle this
  // long is closed.
  int64_t http_request_timeout_ms = 10'000;
  int64_t http_idle_timeout_ms = 60'000;
  // RESP: a command must be complete this long after its first byte; a
  // connection idle this long is closed (0, as Redis's `timeout 0`).
  int64_t resp_command_timeout_ms = 10'000;
  int64_t resp_idle_timeout_ms = 0;
  // Unsent replies of one connection: over the soft limit its input is no
  // longer read or parsed, and if it stays over for output_soft_timeout the
  // connection is closed; over the hard limit it is closed at once.
  int64_t output_soft_limit = 1 << 20;
  int64_t output_soft_timeout_ms = 10'000;
  int64_t output_hard_limit = 16 << 20;
  // SIGTERM: connections still busy are given this long, then closed.
  int64_t drain_timeout_ms = 5'000;
  // The gRPC front (HTTP/2): keep-alive pings to find dead peers (0: none).
  int64_t grpc_keepalive_time_ms = 60'000;
  int64_t grpc_keepalive_timeout_ms = 20'000;
  // Access token for RESP AUTH and HTTP "Authorization: Bearer". Prefer
  // auth_token_env (the name of an environment variable holding it) so the
  // secret stays out of the file. Neither set: no authentication.
  std::string auth_token;
  std::string auth_token_env;
  // Peers whose X-Forwarded-For / Forwarded name the client (networks as
  // "10.0.0.0/8"); none by default. Applied again on reload.
  std::vector<std::string> trusted_proxies;

  friend bool operator==(const ServerConfig&, const ServerConfig&) = default;
};

// Expiring sets (FG.SADD …, /v1/sets/{key}).
struct SetsConfig {
  // Live members per set at most. Adding a new member to a full set is
  // refused; members keep their memory bounded.
  int64_t max_members = 1000;
  // The longest TTL a member may be given.
  int64_t max_ttl_ms = 30LL * 86'400'000;
  // The file has a sets section: a server for sets alone serves something
  // (CheckServesSomething).
  bool in_file = false;

  friend bool operator==(const SetsConfig&, const SetsConfig&) = default;
};

// Where issued OTP codes go instead of back to the caller: an SMS or e-mail
// gateway that takes an HTTP POST of {"subject", "code", "expires_in_ms"}.
struct OtpDeliveryConfig {
  std::string url;              // http://host:port/path; empty: codes are returned
  int64_t timeout_ms = 2000;    // per POST: connect, send and the answer's status line
  int64_t queue_size = 1000;    // codes waiting to be posted; past it issuing fails
  std::string auth_header_env;  // names a variable holding an Authorization value, or ""

  friend bool operator==(const OtpDeliveryConfig&, const OtpDeliveryConfig&) = default;
};

// One-time passwords (FG.OTP.ISSUE / VERIFY, /v1/otp/…). Present only when
// the config has an otp section.
struct OtpConfig {
  bool enabled = false;
  int digits = 6;
  int64_t ttl_ms = 300'000;  // how long a code stays valid
  // Codes issued per subject, and verification attempts per subject (against
  // brute force): each a count per period, counted over a sliding window.
  Limit issue_limit{3, 5, TimeUnit::kMinute};
  Limit verify_limit{5, 15, TimeUnit::kMinute};
  // Codes of one subject valid at once; issuing past it drops the oldest.
  int64_t max_live_codes = 3;
  // The environment variable holding the secret that codes are HMACed
  // under. The file never holds the secret itself.
  std::string secret_env = "FG_OTP_SECRET";
  // The secret: not read from the file. Empty: read from secret_env when the
  // Limiter is created (an embedding program may set it directly).
  std::string secret;
  OtpDeliveryConfig delivery;

  friend bool operator==(const OtpConfig&, const OtpConfig&) = default;
};

// How the rules' quota alerts (Rule::alerts) are delivered: a bounded queue
// and worker threads POSTing each event, retried with exponential backoff
// and jitter, pending events kept across restarts (docs/alerts.md). Read
// once, at Limiter::Create; the rules' thresholds and webhooks reload.
struct AlertDeliveryConfig {
  // Events waiting for delivery or for a retry; past it a new event is
  // dropped (counted and logged): a dead webhook must not grow memory.
  int64_t queue_size = 10'000;
  int workers = 2;            // POSTs in flight at once
  int64_t timeout_ms = 5000;  // per POST: connect, send and the status line
  // A failing event is retried until this long after it was emitted, then
  // dropped (counted).
  int64_t retry_for_ms = 24LL * 3'600'000;
  // The first retry comes after about backoff_initial, each next one after
  // twice as long, at most backoff_max; each wait is drawn at random from
  // its upper half, so that many events do not come back in lockstep.
  int64_t backoff_initial_ms = 1000;
  int64_t backoff_max_ms = 300'000;
  // The embedded store: the file that keeps pending events across a
  // restart. Empty: alerts.spool in $STATE_DIRECTORY (systemd's
  // StateDirectory=), else in /var/lib/floodgate. "off": none (pending
  // events are dropped at shutdown, counted).
  std::string spool;
  int64_t recent = 100;  // events GET /v1/alerts/recent can list
  // The Redis store: pending events live in one stream, shared by every
  // floodgate server on that Redis; it keeps at most this many entries.
  int64_t stream_max_len = 100'000;
  // The Redis store: an event another server took and has not confirmed
  // for this long is taken over (that server stopped without handing it
  // back).
  int64_t claim_after_ms = 60'000;

  friend bool operator==(const AlertDeliveryConfig&, const AlertDeliveryConfig&) = default;
};

// Envoy's rate limit service (gRPC): envoyproxy/ratelimit's YAML files,
// served on listen.grpc. The files themselves are read by
// envoy::LoadDomains (src/config/envoy_ratelimit.h), not by ParseConfig.
struct EnvoyRateLimitConfig {
  // Files, or directories whose *.yaml files are all read (sorted by name),
  // as envoyproxy/ratelimit reads its runtime directory. Relative paths are
  // relative to the directory of the config file naming them.
  std::vector<std::string> files;
  // The algorithm of every `unit` / `requests_per_unit` limit in the files.
  // fixed_window (the default) counts as envoyproxy/ratelimit does.
  Algorithm algorithm = Algorithm::kFixedWindow;
  // What those limits answer when a remote store fails or is late.
  OnBackendError on_backend_error = OnBackendError::kAllow;
  // What those limits answer for a new descriptor when the embedded store
  // is full.
  OnStoreFull on_store_full = OnStoreFull::kDeny;
  // RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset in every
  // response's response_headers_to_add, as envoyproxy/ratelimit's
  // LIMIT_RESPONSE_HEADERS_ENABLED.
  bool response_headers = false;
};

// Who is being limited (docs/visibility.md): the top-subjects sketch and
// the sampled log of denials.
inline constexpr int64_t kMaxTopCapacity = 65'536;

struct VisibilityConfig {
  // The heavy-hitter sketch per rule behind GET /v1/admin/top; false keeps
  // it out of every decision.
  bool top_subjects = true;
  // Counters of each sketch of the current 10 s (one per event loop);
  // docs/visibility.md has the error bound and the memory this takes.
  int64_t top_capacity = 256;
  // "msg=denied" log lines: at most one per subject per this long, and at
  // most kMaxDeniedLinesPerSecond in all; 0: none.
  int64_t denied_log_interval_ms = 60'000;
  // On a Redis store, how often this server publishes its sketches for the
  // other servers' GET /v1/admin/top (each kept for three times this long).
  int64_t publish_interval_ms = 5'000;

  friend bool operator==(const VisibilityConfig&, const VisibilityConfig&) = default;
};

// The control plane's access (docs/control-plane.md). Each names an
// environment variable holding a token: the file never holds the secret.
// With no admin token, admin routes and commands answer loopback clients
// only (like Redis's protected mode).
struct AdminConfig {
  std::string token_env;       // reads and writes
  std::string read_token_env;  // reads only (GET routes, FG.STATE, FG.OVERRIDE GET)
  // A token sent in clear from another host is a token anyone on the path
  // holds: refused (403) unless this is true. Loopback and TLS clients are
  // never refused for it.
  bool allow_plaintext = false;
  // Client certificate names (CN or a DNS, email or URI SAN) that are an
  // admin identity, reads and writes, with no token: a client whose
  // certificate verified against tls.client_ca_file (mTLS). The change log
  // records the name.
  std::vector<std::string> client_names;

  friend bool operator==(const AdminConfig&, const AdminConfig&) = default;
};

// A network list (`lists:`): a file of one network a line, or inline
// networks. Read again on every reload.
struct ListConfig {
  std::string name;
  std::string file;                // "" : inline
  std::vector<std::string> cidrs;  // inline; empty with a file
  friend bool operator==(const ListConfig&, const ListConfig&) = default;
};

// The `jwt:` section: how `{jwt:CLAIM}` parts verify a bearer token.
struct JwtConfig {
  bool in_file = false;  // the section is there
  std::string jwks_file;
  std::string issuer;
  std::string audience;
  int64_t leeway_ms = 30'000;
  // The field the token comes in, "Bearer <token>", lower-cased. Another
  // than Authorization when server.auth_token takes that one.
  std::string header = "authorization";
  std::string hs256_secret_env;  // "" : no HS256
  // The secret: read from hs256_secret_env when the subjects are built
  // (an embedding program may set it directly), never from the file.
  std::string hs256_secret;
  friend bool operator==(const JwtConfig&, const JwtConfig&) = default;
};

struct Config {
  std::string source;  // file name, for messages
  std::string store = "memory";
  ListenConfig listen;
  ListenTlsConfig listen_tls;
  TlsConfig tls;
  EngineConfig engine;
  RedisConfig redis;
  ServerConfig server;
  SetsConfig sets;
  OtpConfig otp;
  AlertDeliveryConfig alert_delivery;
  std::vector<Rule> rules;  // in file order; names are unique
  EnvoyRateLimitConfig envoy_ratelimit;
  AdminConfig admin;
  VisibilityConfig visibility;
  // Network lists, by name (rules' deny_list, allow_list), in file order.
  std::vector<ListConfig> lists;
  JwtConfig jwt;
  // Keys appear hashed ("sha256:" and 16 hex digits) wherever floodgate
  // shows subjects it was not asked about: GET /v1/admin/top, the dashboard
  // and the msg=denied log lines.
  bool redact_keys = false;
  // The embedded store keeps the control plane's records (overrides,
  // blocks, runtime rules) here across restarts, and its own state
  // (counters, sets, OTP, leases) in <data_dir>/state.snapshot, written
  // every snapshot_interval and at shutdown; "" : in memory only.
  std::string data_dir;
  // 0: only at shutdown.
  int64_t snapshot_interval_ms = 30'000;
};

// Parses a config from YAML text. `source` names the file in messages, which
// read "source:line:column: what is wrong (near 'text')".
Result<Config> ParseConfig(std::string_view yaml, std::string_view source);
Result<Config> LoadConfigFile(const std::string& path);

// A readable summary of the rules, as printed by `floodgate check-config`.
std::string DescribeConfig(const Config& config);

// A config that serves nothing (no rule, no otp or sets section, and
// `envoy_domains`, the domains its envoy_ratelimit files hold, is 0) is
// refused at start, at reload and by check-config: an empty file reloaded
// by mistake would otherwise answer "unknown rule" to every check. The
// error names the file.
Status CheckServesSomething(const Config& config, size_t envoy_domains);

// The sections of `fresh` that differ from `running` and that a reload does
// not apply (store, listen, engine, redis, server, sets, otp,
// alert_delivery, admin, visibility, redact_keys, data_dir,
// snapshot_interval): each takes effect at the next start. In file order.
std::vector<std::string> RestartOnlyChanges(const Config& running, const Config& fresh);

// The rules of `running` that `fresh` no longer has, by name.
std::vector<std::string> RemovedRules(const Config& running, const Config& fresh);

}  // namespace floodgate
