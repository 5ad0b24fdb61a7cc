// PeerAddress and ConnectionsPerIp: see peer_address.h.
#include "server/net/peer_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace floodgate::server {

PeerAddress PeerAddress::From(const sockaddr_storage& addr) {
  PeerAddress p;
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    p.family = AF_INET;
    p.port = ntohs(in.sin_port);
    std::memcpy(p.ip.data(), &in.sin_addr, 4);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    p.family = AF_INET6;
    p.port = ntohs(in6.sin6_port);
    std::memcpy(p.ip.data(), &in6.sin6_addr, 16);
  }
  return p;
}

IpAddress PeerAddress::Ip() const {
  if (family == AF_INET) {
    return IpAddress::FromV4(uint32_t{ip[0]} << 24 | uint32_t{ip[1]} << 16 | uint32_t{ip[2]} << 8 |
                             ip[3]);
  }
  if (family == AF_INET6) return IpAddress::FromV6Bytes(ip);
  return IpAddress();
}

std::string PeerAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family == AF_INET) {
    inet_ntop(AF_INET, ip.data(), text, sizeof(text));
    return std::string(text) + ":" + std::to_string(port);
  }
  if (family == AF_INET6) {
    inet_ntop(AF_INET6, ip.data(), text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  return "?";
}

std::string PeerAddress::IpKey() const {
  std::string key(1, static_cast<char>(family));
  key.append(reinterpret_cast<const char*>(ip.data()), family == AF_INET ? 4 : 16);
  return key;
}

bool ConnectionsPerIp::TryAdd(const PeerAddress& peer) {
  const std::string key = peer.IpKey();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t& open = open_[key];
  if (open >= max_) return false;
  ++open;
  return true;
}

void ConnectionsPerIp::Remove(const PeerAddress& peer) {
  const std::string key = peer.IpKey();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(key);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);  // the map holds only addresses with connections
}

}  // namespace floodgate::server
