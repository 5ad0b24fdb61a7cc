// StateKeeper: see state_keeper.h.
#include "service/snapshots/state_keeper.h"

#include <utility>

#include "common/log.h"

namespace floodgate::service {

std::string StateKeeper::SnapshotPath(const std::string& data_dir) {
  return data_dir + (data_dir.ends_with('/') ? "" : "/") + "state.snapshot";
}

StateKeeper::StateKeeper(store::Snapshots& snapshots, std::string data_dir, int64_t interval_ms,
                         const Clock& clock)
    : snapshots_(snapshots),
      path_(SnapshotPath(data_dir)),
      interval_ms_(interval_ms),
      clock_(clock) {}

StateKeeper::~StateKeeper() { saver_.Stop(); }

Status StateKeeper::Load(bool start_empty) {
  auto loaded = snapshots_.Load(path_);
  if (!loaded.ok()) {
    if (loaded.status().code() == StatusCode::kNotFound) {
      Log(LogLevel::kInfo, "no saved state: starting empty", {{"path", path_}});
    } else if (start_empty) {
      Log(LogLevel::kWarn, "saved state refused: starting empty (--start-empty)",
          {{"path", path_}, {"error", loaded.status().message()}});
    } else {
      return loaded.status();
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
    return Status::Ok();
  }
  const store::StateFigures& f = *loaded;
  Log(LogLevel::kInfo, "saved state loaded",
      {{"path", path_},
       {"entries", std::to_string(f.entries)},
       {"bytes", std::to_string(f.bytes)},
       {"ms", std::to_string(f.duration_ms)},
       {"saved_ms_ago", std::to_string(clock_.NowMs() - f.written_at_ms)},
       {"skipped_expired", std::to_string(f.skipped_expired)},
       {"skipped_unknown_rule", std::to_string(f.skipped_unknown)},
       {"refused_full", std::to_string(f.refused_full)}});
  std::lock_guard<std::mutex> lock(mu_);
  stats_.load = f;
  stats_.loaded = true;
  ready_ = true;
  return Status::Ok();
}

void StateKeeper::Start() {
  if (interval_ms_ <= 0 || saver_.started()) return;
  saver_.Start([this] { Run(); });
}

void StateKeeper::Run() {
  // Real time, not clock_: how long to sleep, not an instant of the data.
  while (saver_.SleepFor(interval_ms_ * int64_t{1'000'000})) SaveNow();
}

Status StateKeeper::SaveNow() {
  std::lock_guard<std::mutex> one(save_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) return InternalError("the saved state was not loaded: not replacing " + path_);
  }
  auto saved = snapshots_.Save(path_);
  std::lock_guard<std::mutex> lock(mu_);
  if (!saved.ok()) {
    ++stats_.save_failures;
    Log(LogLevel::kError, "state snapshot failed",
        {{"path", path_}, {"error", saved.status().message()}});
    return saved.status();
  }
  ++stats_.saves;
  stats_.last_save = *saved;
  return Status::Ok();
}

Status StateKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return final_;
  }
  saver_.Stop();
  Status s = SaveNow();
  if (s.ok()) {
    const Stats st = GetStats();
    Log(LogLevel::kInfo, "state saved",
        {{"path", path_},
         {"entries", std::to_string(st.last_save.entries)},
         {"bytes", std::to_string(st.last_save.bytes)},
         {"ms", std::to_string(st.last_save.duration_ms)}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  final_ = s;
  return s;
}

StateKeeper::Stats StateKeeper::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace floodgate::service
