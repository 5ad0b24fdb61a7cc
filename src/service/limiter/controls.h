// Controls: what the control plane (service/control/control_plane.h) puts in force
// for decisions and leases, as they read it: blocks of subjects and of
// networks, and whether any override or block may be in force at all.
//
// The control plane writes (Apply, AddBlock: its hooks, wired in api/);
// the decision path reads (any, BlockedUntil, AddressBlockedUntil). A rule's block_for blocks a
// subject from the decision path (BlockFor): in force here at once, and
// handed to the control plane to list and share (the auto_block hook).
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/ip_address.h"
#include "floodgate/status.h"
#include "service/control/block_table.h"
#include "service/control/control_plane.h"
#include "service/control/network_block_table.h"
#include "service/limiter/rule_set.h"

namespace floodgate::service {

class Controls {
 public:
  // Hands a block_for's block to the control plane (ControlPlane::AutoBlock).
  using AutoBlock = std::function<void(std::string_view rule, std::string_view subject,
                                       int64_t until_ms, std::string_view reason)>;

  // `rules` gets the records' runtime rules and overrides; it must outlive
  // this.
  explicit Controls(RuleBook& rules) : rules_(rules) {}

  // Set once, before decisions run (the control plane is made after the
  // decisions' rooms).
  void SetAutoBlock(AutoBlock auto_block) { auto_block_ = std::move(auto_block); }

  // The control plane's records in force from now: rules rebuilt with its
  // runtime rules and overrides, blocks replaced. A rule set that does not
  // build keeps the previous records (logged).
  void Apply(const ControlRecords& records);
  // One block (of a subject or a network) in force at once, beside those
  // Apply gave.
  void AddBlock(const BlockRecord& block);
  // block_for: blocks `subject` of `rule` until until_ms, here and in the
  // control plane.
  void BlockFor(std::string_view rule, std::string_view subject, int64_t until_ms,
                std::string_view reason);

  // Whether any override or block may be in force: one relaxed load, what a
  // decision tests before looking for either.
  bool any() const { return any_.load(std::memory_order_relaxed); }
  // Whether any subject is blocked (key blocks; networks are apart).
  bool any_block() const { return blocks_.any(); }
  // The end of the latest block of `subject` on `rule` running at now_ms,
  // and its reason (BlockTable::Until); 0 when none.
  int64_t BlockedUntil(std::string_view rule, std::string_view subject, int64_t now_ms,
                       std::string_view* reason) const {
    return blocks_.Until(rule, subject, now_ms, reason);
  }
  // Whether any network is blocked: one relaxed load, what a decision tests
  // before it reads an address from its subject.
  bool any_address_block() const { return networks_.any(); }
  // The end of the latest block running at now_ms, on `rule` or on every
  // rule, of any blocked network holding `address`, and its reason
  // (NetworkBlockTable::Until); 0 when none. The reason's text stays valid
  // until this thread's next call.
  int64_t AddressBlockedUntil(const IpAddress& address, std::string_view rule, int64_t now_ms,
                              std::string_view* reason) const {
    return networks_.Until(address, rule, now_ms, reason);
  }

 private:
  RuleBook& rules_;
  AutoBlock auto_block_;
  BlockTable blocks_;
  NetworkBlockTable networks_;
  std::atomic<bool> any_{false};
};

}  // namespace floodgate::service
