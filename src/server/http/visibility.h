// Visibility: who is being limited (docs/visibility.md). Owns the
// top-subjects sketch every decision feeds, the sampled log of denials, the
// event streams of GET /v1/admin/events and the thread behind them, which
// once a second writes the streams' events and, on a shared (Redis) store,
// publishes this server's sketches and reads the others'.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "floodgate/config.h"
#include "server/http/event_streams.h"
#include "server/observability/denied_log.h"
#include "server/observability/metrics.h"
#include "server/observability/top_recorder.h"
#include "service/services.h"
#include "service/top/top_subjects.h"
#include "store/backend.h"
#include "store/sketch_board.h"

namespace floodgate::server {

struct ServiceContext;

// Entries of each sketch a server publishes for the others (the top of its
// sketch, with the rest's bound carried as error).
inline constexpr size_t kPublishedEntries = 200;
// How long after a stats query the thread keeps probing the store's nodes
// each second (as it does while a stream is open).
inline constexpr int64_t kAskedForMs = 60'000;

// Thread-safe.
class Visibility {
 public:
  // `loops`: the event loops that record (the sketch's shards).
  Visibility(const VisibilityConfig& config, bool redact_keys, service::Services* services,
             int loops = 1);
  ~Visibility();  // stops the thread (Stop)
  Visibility(const Visibility&) = delete;
  Visibility& operator=(const Visibility&) = delete;

  // Starts the once-a-second thread for the server `service` describes;
  // `service` must stay valid until Stop. Before any loop runs (sessions
  // read streams() unsynchronised).
  void Start(const ServiceContext* service);
  // Stops the thread: no stream is written after this returns. Idempotent.
  void Stop();

  service::TopSubjects* top() { return top_.get(); }   // null when top_subjects is off
  TopRecorder* recorder() { return recorder_.get(); }  // null when top_subjects is off
  DeniedLog* denied_log() { return &denied_log_; }
  EventStreams* streams() { return streams_.get(); }  // null before Start
  bool redact_keys() const { return redact_keys_; }

  // GET /v1/admin/top's list: this server's sketch of `rule`, merged with
  // the other servers' last published ones on a shared store.
  std::vector<service::TopEntry> Top(std::string_view rule, service::TopBy by,
                                     service::TopWindow window, size_t limit, int64_t now_ms) const;
  // How many servers' sketches Top merges (this one included).
  size_t Servers() const;

  // Runs `job` (a simulation) on a thread of its own, then the answer it
  // returns, once the next simulation may start: a client that sends
  // another as soon as it has the answer is not told one is running.
  // False when one is still running, or after Stop.
  bool RunSimulation(std::function<std::function<void()>()> job);

  // GET /v1/admin/stats's body.
  void AppendStatsJson(int64_t now_ms, std::string* out) const;

  // On a shared store: publishes this server's sketches (when they
  // changed, or to keep them from expiring) and reads the other servers'
  // (what the thread does every publish_interval; blocking).
  void Exchange(int64_t now_ms);

  // The blob this server publishes: every rule's sketches, compacted.
  std::string Serialize(int64_t now_ms) const;
  // The sketches of a blob another server published; INVALID_ARGUMENT for
  // bytes that are not one.
  struct Sketch {
    std::string rule;
    service::TopBy by;
    service::TopWindow window;
    service::SpaceSaving sketch{1};
  };
  static Result<std::vector<Sketch>> Parse(std::string_view blob);

 private:
  std::string Tick(int64_t tick, bool streaming);
  void AppendStoreJson(std::string* out) const;
  void AppendRuleSeconds(int64_t now_s, std::string* out) const;
  // What is shown of one rule: its name, its per-loop counters (null: none
  // yet), whether it is counted by leases, and its leases in flight.
  struct ShownRule {
    std::string_view name;
    const RuleCounters* per_loop;
    int loops;
    bool leases;
    int64_t in_flight;
  };
  // Calls fn for every rule shown: what was counted, then every rule
  // `config` has that was not.
  void ForEachShownRule(const Config& config,
                        const std::function<void(const ShownRule&)>& fn) const;
  // Appends one rule's entry: its name, each of its series (`value`
  // writes one: an array of seconds, or one second's count), their totals
  // when `with_totals`, and its leases in flight when it is counted by
  // leases.
  static void AppendRuleEntry(const ShownRule& rule, bool with_totals,
                              const std::function<void(SeriesOutcome, std::string*)>& value,
                              std::string* out);
  std::string NewAlertEvents();
  std::string ShownAlert(const AlertRecord& record) const;

  const VisibilityConfig config_;
  const bool redact_keys_;
  service::Services* const services_;
  const std::string_view store_kind_;  // as the store says (store::Store::Usage::kind)
  std::unique_ptr<service::TopSubjects> top_;
  std::unique_ptr<TopRecorder> recorder_;  // feeds top_
  DeniedLog denied_log_;
  std::unique_ptr<store::SketchBoard> board_;  // null: nobody to share with
  std::string server_name_;                    // this server's name on the board
  const ServiceContext* service_ = nullptr;

  mutable std::mutex mu_;
  // The other servers' sketches as last read from the board.
  std::vector<Sketch> remote_ ABSL_GUARDED_BY(mu_);
  size_t remote_servers_ ABSL_GUARDED_BY(mu_) = 0;
  // The store's nodes as last probed (each tick on a remote store).
  std::vector<store::NodeHealth> nodes_ ABSL_GUARDED_BY(mu_);
  std::string store_error_ ABSL_GUARDED_BY(mu_);
  // When GET /v1/admin/stats last asked (unix ms): the store's nodes are
  // probed each second while someone looks, else with each exchange.
  mutable std::atomic<int64_t> stats_asked_ms_{0};
  // The streams' thread's: what was last published, and when.
  int64_t published_records_ = 0;  // recorder_->recorded() as last published
  int64_t published_at_ms_ = 0;
  int64_t changed_at_ms_ = 0;  // when recorded() last moved

  std::mutex sim_mu_;
  bool sim_running_ ABSL_GUARDED_BY(sim_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(sim_mu_) = false;
  std::thread sim_thread_ ABSL_GUARDED_BY(sim_mu_);

  // The streams' thread's own: alert events already streamed.
  absl::flat_hash_set<std::string> streamed_alerts_;
  std::vector<std::string> streamed_order_;
  std::unique_ptr<EventStreams> streams_;  // last: its thread uses the above
};

}  // namespace floodgate::server
