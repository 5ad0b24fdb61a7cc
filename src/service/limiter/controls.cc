// Controls: see controls.h.
#include "service/limiter/controls.h"

#include "common/log.h"

namespace floodgate::service {

void Controls::Apply(const ControlRecords& records) {
  blocks_.Replace(records.blocks);
  networks_.Replace(records.blocks);
  if (Status s = rules_.Apply(records); !s.ok()) {
    Log(LogLevel::kWarn, "control records not applied", {{"error", s.message()}});
  }
  any_.store(!records.overrides.empty() || blocks_.any() || networks_.any(),
             std::memory_order_relaxed);
}

void Controls::AddBlock(const BlockRecord& block) {
  if (block.cidr.empty()) {
    blocks_.Add(block.rule, block.key, block.expires_at_ms, block.reason);
  } else {
    networks_.Add(block);
  }
  any_.store(true, std::memory_order_relaxed);
}

void Controls::BlockFor(std::string_view rule, std::string_view subject, int64_t until_ms,
                        std::string_view reason) {
  // The control plane first: it lists the block from now on, and a reload
  // it makes keeps it in force from then on (ControlPlane::Reload).
  if (auto_block_) auto_block_(rule, subject, until_ms, reason);
  blocks_.Add(rule, subject, until_ms, std::string(reason));
  any_.store(true, std::memory_order_relaxed);
}

}  // namespace floodgate::service
