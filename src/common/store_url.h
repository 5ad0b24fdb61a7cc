// Redis store URLs: which deployment to talk to and how.
//
//   redis://[user:pass@]host:port[/db][?options]        one server
//   rediss://...                                         the same over TLS
//   redis+cluster://[user:pass@]h1:p1,h2:p2,...[?opts]   Redis Cluster (any nodes as seeds)
//   redis+proxy://[user:pass@]host:port[?options]        Twemproxy (nutcracker) or similar
//   rediss+cluster://, rediss+proxy://                   cluster / proxy over TLS
//   redis-sentinel://[user:pass@]s1:p1,s2:p2/master[?db=N&tls=yes]
//                                                        the master Redis Sentinel names
//   rediss-sentinel://...                                the same over TLS (tls=yes)
//
// Hosts are names, IPv4 addresses or bracketed IPv6 addresses ("[::1]:6379");
// the port is required. User and password are percent-decoded, so reserved
// characters in a password ('@', ':', '/', '?', '#', '%') must be written
// percent-encoded. Options (TLS schemes only): tls_ca_file, tls_cert_file,
// tls_key_file, tls_server_name, tls_verify=yes|no. Sentinel URLs list the
// sentinels and end in the master's name; their user and password are the
// master's, `sentinel_password` (and `sentinel_user`) the sentinels' own, and
// `db` selects the database. See docs/redis.md.
//
// In common/ although only the Redis store connects by it: the config
// checks a `store:` URL when it loads (config/ sits below redis/), and the
// store picked at start (api/open_store.h) reads it too. So it is in
// namespace floodgate, as the config's other words are, not redis::: the
// URL is what the operator wrote, which every layer that reads it shares;
// how the Redis store connects by it stays in redis/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"

namespace floodgate {

enum class StoreMode {
  kStandalone,  // one redis-server
  kCluster,     // Redis Cluster: keys routed by slot
  kProxy,       // a proxy that routes by key itself: no SELECT, no CLUSTER
  kSentinel,    // one master, found and followed through Redis Sentinel
};

// "standalone", "cluster", "proxy" or "sentinel".
const char* StoreModeName(StoreMode mode);

struct HostPort {
  std::string host;  // without brackets, also for IPv6
  int port = 0;

  // "host:port", or "[v6]:port" when the host holds a ':'. Used as node ids.
  std::string ToString() const;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Parses "host:port" or "[v6]:port" (a node id, or an address in a MOVED
// reply). Errors quote the text.
Result<HostPort> ParseHostPort(std::string_view text);

// How the store's connections to Redis speak TLS (a rediss:// URL's options),
// named apart from any TLS of floodgate's own listeners.
struct StoreTlsOptions {
  std::string ca_file;      // PEM CA bundle to verify the server; empty: the system's
  std::string cert_file;    // PEM client certificate (servers with tls-auth-clients yes)
  std::string key_file;     // its PEM private key
  std::string server_name;  // name sent as SNI and verified; empty: the URL's host
  bool verify = true;       // false: accept any certificate (tests only)
};

struct StoreUrl {
  StoreMode mode = StoreMode::kStandalone;
  bool tls = false;
  std::string user;      // empty: the default user (AUTH with the password alone)
  std::string password;  // empty: no AUTH
  // One for standalone and proxy; seeds for cluster; the sentinels for sentinel.
  std::vector<HostPort> nodes;
  int db = -1;  // standalone and sentinel only; -1: not given (no SELECT)
  // Sentinel: the master's name (`sentinel monitor <name> ...`), and the
  // credentials the sentinels themselves want (empty: no AUTH).
  std::string master_name;
  std::string sentinel_user;
  std::string sentinel_password;
  StoreTlsOptions tls_options;

  // The URL with the password replaced by "***": safe for logs and errors.
  std::string Redacted() const;
};

// Parses a store URL. Errors are INVALID_ARGUMENT and quote the offending
// part (never the user or password).
Result<StoreUrl> ParseStoreUrl(std::string_view url);

}  // namespace floodgate
