// PeerAddress: a client's IP address and port, compact enough to keep per
// connection; ConnectionsPerIp: open connections per client address, the
// bound server.max_connections_per_ip enforces across every loop.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/ip_address.h"

namespace floodgate::server {

struct PeerAddress {
  uint8_t family = 0;  // AF_INET, AF_INET6, or 0 (unknown)
  uint16_t port = 0;
  std::array<uint8_t, 16> ip{};  // 4 bytes for AF_INET, 16 for AF_INET6

  static PeerAddress From(const sockaddr_storage& addr);
  // "127.0.0.1:5000", "[::1]:5000", "?" when unknown.
  std::string ToString() const;
  // The address alone, as a map key: family byte + address bytes.
  std::string IpKey() const;
  // The address alone (IPv4-mapped IPv6 is IPv4); "::" when unknown.
  IpAddress Ip() const;
};

// Thread-safe. Touched only when a connection opens or closes, never per
// request; with no bound it is never touched at all.
class ConnectionsPerIp {
 public:
  explicit ConnectionsPerIp(int64_t max_per_ip) : max_(max_per_ip) {}
  // Counts one more connection from `peer` unless it has max_per_ip open.
  bool TryAdd(const PeerAddress& peer);
  void Remove(const PeerAddress& peer);
  int64_t max() const { return max_; }

 private:
  const int64_t max_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, int64_t> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace floodgate::server
