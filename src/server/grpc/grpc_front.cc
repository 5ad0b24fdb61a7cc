// GrpcFront: see grpc_front.h.
//
// Why a completion queue per thread and not gRPC's callback API: the
// callback API runs each handler on a thread of gRPC's callback pool, so a
// call crossed from the thread that read it to a pool thread, and the
// answer back, and every call took the descriptor metrics' shared mutex;
// on a two-core machine shared with the clients that made ShouldRateLimit
// cost about 26 us of server CPU per call against about 17 us here, of
// which gRPC's transport alone takes 14-16 us (docs/benchmarks.md, "Envoy
// RateLimitService"). Here the thread that polls the connections also
// decodes, decides and answers.
//
// A worker's round: wait for one event of its queue, take the others
// already there without waiting (a store that answers later: what one
// flush gathers), flush the batch. Events: a new call (decode, start its
// RlsCall; answer it if decided), an answer sent (the slot is reused for a
// new call), the wake alarm (calls whose store answers came on another
// thread: continue each, answer the decided ones).
//
// Slots: each call in progress has one (its gRPC context, messages,
// decoded request and RlsCall), reused for a later call, so a thread that
// answers one call after another allocates little of its own. A worker
// keeps kRequestedCalls slots asked of gRPC for new calls at any time; a
// slot that receives a call is replaced at once (from the free slots), so
// calls waiting for a store do not limit how many can arrive.
//
// Shutdown: Server::Shutdown returns once every call is finished and its
// context destroyed (calls waiting for a store included: the store answers
// within its timeout), and every slot still asked for a call has been told
// (ok false, and not asked again). Only then are the queues shut down: an
// alarm is set, or a call requested, only while a call is in progress, so
// never on a queue shut down.
#include "server/grpc/grpc_front.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <chrono>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "server/grpc/grpc_tls_credentials.h"
#include "server/net/listener.h"

namespace floodgate::server {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

// Slots each worker keeps asked of gRPC for new calls.
constexpr int kRequestedCalls = 64;
// Events one round takes before flushing its decisions to a remote store.
constexpr int kEventsPerRound = 256;

grpc::StatusCode ToGrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kInternal:
      break;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace

// One thread and its completion queue. Run() on its own thread; Resume from
// any thread.
class GrpcFront::Worker {
 public:
  Worker(int index, RlsService* service, pb::RateLimitService::AsyncService* async,
         std::unique_ptr<grpc::ServerCompletionQueue> cq, const GrpcFrontOptions& options,
         RlsMetrics::Block* metrics)
      : index_(index),
        service_(service),
        async_(async),
        cq_(std::move(cq)),
        limits_(options.request_limits),
        metrics_(metrics),
        batch_(service->limiter().NewBatch(options.max_store_calls_in_flight)) {}

  void Run();
  // After Server::Shutdown has returned: the queue drains, then Run returns.
  void ShutdownQueue() { cq_->Shutdown(); }

 private:
  // One call in progress, or asked of gRPC. Its tag on the queue is itself.
  struct Slot final : RlsCall::Owner {
    enum class State { kRequested, kDeciding, kFinishing };
    explicit Slot(Worker* w) : worker(w) {}
    void Resume(RlsCall*) override { worker->Resume(this); }

    Worker* const worker;
    State state = State::kRequested;
    std::optional<grpc::ServerContext> context;
    std::optional<grpc::ServerAsyncResponseWriter<pb::RateLimitResponse>> responder;
    pb::RateLimitRequest request;
    pb::RateLimitResponse response;
    rls::Request decoded;
    RlsCall call{this};
  };

  void Handle(void* tag, bool ok);
  void RequestCall(Slot* slot);
  // The slot's call is over (or never came): its context goes, the slot
  // waits in free_ for the next RequestCall.
  void Release(Slot* slot);
  void Begin(Slot* slot);
  void Respond(Slot* slot);
  // Continues calls whose round the store completed; answers those decided.
  void ContinueAll(std::vector<Slot*>& slots);
  void EndRound();
  // Thread-safe: `slot`'s round is complete; continue it on this thread.
  void Resume(Slot* slot);
  Slot* NewSlot();

  const int index_;
  RlsService* const service_;
  pb::RateLimitService::AsyncService* const async_;
  const std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  const rls::RequestLimits limits_;
  RlsMetrics::Block* const metrics_;
  // Set once the batch has held a decision: the store answers later, so
  // events already queued join a round to share its flush.
  bool gathers_ = false;
  const std::unique_ptr<store::Batch> batch_;
  std::vector<std::unique_ptr<Slot>> slots_;  // every slot made, for their lifetime
  std::vector<Slot*> free_;                   // slots neither asked for nor in use
  std::vector<Slot*> local_;                  // resumed on this thread (inside a flush)
  std::vector<Slot*> continuing_;             // the worker's, swapped with resumed_

  std::mutex mu_;
  std::vector<Slot*> resumed_ ABSL_GUARDED_BY(mu_);
  bool wake_set_ ABSL_GUARDED_BY(mu_) = false;
  // Set (on the queue, due at once) when resumed_ gains its first slot.
  grpc::Alarm wake_ ABSL_GUARDED_BY(mu_);
};

namespace {
// The worker running on this thread, if any: a resume from inside its own
// flush is queued without the alarm.
thread_local const void* t_worker = nullptr;
}  // namespace

void GrpcFront::Worker::Run() {
  const std::string name = "fg-grpc-" + std::to_string(index_);
  pthread_setname_np(pthread_self(), name.c_str());
  t_worker = this;
  for (int i = 0; i < kRequestedCalls; ++i) RequestCall(NewSlot());
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    Handle(tag, ok);
    // With a store that answers later, the events already queued join this
    // round, so that their decisions go to the store in one flush.
    gathers_ = gathers_ || batch_->size() > 0;
    for (int n = 1; gathers_ && n < kEventsPerRound; ++n) {
      if (cq_->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) !=
          grpc::CompletionQueue::GOT_EVENT) {
        break;
      }
      Handle(tag, ok);
    }
    EndRound();
  }
  batch_->FlushAll();  // empty: every call was answered before the queue shut down
  t_worker = nullptr;
}

GrpcFront::Worker::Slot* GrpcFront::Worker::NewSlot() {
  if (!free_.empty()) {
    Slot* slot = free_.back();
    free_.pop_back();
    return slot;
  }
  slots_.push_back(std::make_unique<Slot>(this));
  return slots_.back().get();
}

void GrpcFront::Worker::RequestCall(Slot* slot) {
  slot->state = Slot::State::kRequested;
  slot->context.emplace();  // gRPC contexts are not reusable: a fresh one per call
  slot->responder.emplace(&*slot->context);
  slot->request.Clear();
  slot->response.Clear();
  async_->RequestShouldRateLimit(&*slot->context, &slot->request, &*slot->responder, cq_.get(),
                                 cq_.get(), slot);
}

void GrpcFront::Worker::Release(Slot* slot) {
  slot->responder.reset();
  slot->context.reset();
  free_.push_back(slot);
}

void GrpcFront::Worker::Handle(void* tag, bool ok) {
  if (tag == &wake_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      continuing_.swap(resumed_);
      wake_set_ = false;
    }
    ContinueAll(continuing_);
    return;
  }
  Slot* slot = static_cast<Slot*>(tag);
  switch (slot->state) {
    case Slot::State::kRequested:
      if (!ok) {
        // The server is shutting down: no call came, and none will.
        Release(slot);
        return;
      }
      // Asked before this call can end: a call in progress holds
      // Server::Shutdown back, so the queue cannot be shut down under
      // this request.
      RequestCall(NewSlot());
      Begin(slot);
      return;
    case Slot::State::kFinishing:
      // Answered (ok false: the client had gone).
      Release(slot);
      return;
    case Slot::State::kDeciding:
      break;  // not a tag while deciding
  }
}

void GrpcFront::Worker::Begin(Slot* slot) {
  slot->state = Slot::State::kDeciding;
  if (Status s = rls::ToRequest(slot->request, limits_, &slot->decoded); !s.ok()) {
    metrics_->CountRequest(grpc::StatusCode::INVALID_ARGUMENT, 0);
    slot->state = Slot::State::kFinishing;
    slot->responder->FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message()),
                                     slot);
    return;
  }
  if (slot->call.Start(*service_, slot->decoded, batch_.get())) Respond(slot);
}

void GrpcFront::Worker::Respond(Slot* slot) {
  slot->state = Slot::State::kFinishing;
  const Status& s = slot->call.status();
  if (!s.ok()) {
    const grpc::StatusCode code = ToGrpcCode(s.code());
    metrics_->CountRequest(code, 0);
    slot->responder->FinishWithError(grpc::Status(code, s.message()), slot);
    return;
  }
  const rls::Response& r = slot->call.response();
  metrics_->CountOutcomes(slot->call.domain(), slot->call.outcomes());
  metrics_->CountRequest(grpc::StatusCode::OK, static_cast<int>(r.overall_code));
  rls::ToProto(r, &slot->response);
  slot->responder->Finish(slot->response, grpc::Status::OK, slot);
}

void GrpcFront::Worker::ContinueAll(std::vector<Slot*>& slots) {
  for (Slot* slot : slots) {
    if (slot->call.Continue(batch_.get())) Respond(slot);
  }
  slots.clear();
}

void GrpcFront::Worker::EndRound() {
  batch_->Flush();
  // A flush may answer decisions it held past their deadline, here on this
  // thread; their calls go on now, and what they ask goes out too.
  while (!local_.empty()) {
    std::vector<Slot*> slots;
    slots.swap(local_);
    ContinueAll(slots);
    batch_->Flush();
  }
}

void GrpcFront::Worker::Resume(Slot* slot) {
  if (t_worker == this) {
    local_.push_back(slot);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  resumed_.push_back(slot);
  if (wake_set_) return;  // set and not yet taken: it brings this slot too
  wake_set_ = true;
  // Under the lock: the next Set waits until this one has returned.
  wake_.Set(cq_.get(), gpr_time_0(GPR_CLOCK_MONOTONIC), &wake_);
}

Result<std::unique_ptr<GrpcFront>> GrpcFront::Start(const GrpcFrontOptions& options,
                                                    RlsService* service) {
  const size_t colon = options.address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("gRPC address '" + options.address + "' is not host:port");
  }
  if (options.threads < 1 || options.threads > 256) {
    return InvalidArgumentError("gRPC threads must be between 1 and 256");
  }
  std::unique_ptr<GrpcFront> front(new GrpcFront());
  front->service_ = service;
  auto async = std::make_unique<pb::RateLimitService::AsyncService>();
  pb::RateLimitService::AsyncService* async_service = async.get();
  front->async_service_ = std::move(async);
  front->metrics_ = std::make_unique<RlsMetrics>(options.threads);
  // gRPC sets SO_REUSEPORT by default: a second server would then share the
  // port silently instead of failing to start. On a numeric address the
  // port is checked first, as the other fronts' are (CheckPortFree), and
  // SO_REUSEPORT kept: a floodgate started with --replace can then join it
  // (docs/operations.md, "Graceful restart"). On a host name (which gRPC
  // resolves) it is left off.
  auto endpoint = ParseEndpoint(options.address);
  if (endpoint.ok() && !options.replace) {
    if (Status s = CheckPortFree(*endpoint, "for gRPC "); !s.ok()) return s;
  }
  grpc::ServerBuilder builder;
  int port = 0;
  // Kept until the server is gone: gRPC calls TLS credentials back at
  // every handshake.
  front->credentials_ = options.tls != nullptr ? ReloadingTlsCredentials(options.tls)
                                               : grpc::InsecureServerCredentials();
  builder.AddListeningPort(options.address, front->credentials_, &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, endpoint.ok() ? 1 : 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // Dead peers must not hold connections forever: a client that vanished
  // (a crashed Envoy, a dropped network path) does not answer pings.
  if (options.keepalive_time_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(options.keepalive_time_ms));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               static_cast<int>(options.keepalive_timeout_ms));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  }
  front->drain_timeout_ms_ = options.drain_timeout_ms;
  builder.RegisterService(async_service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < options.threads; ++i) queues.push_back(builder.AddCompletionQueue());
  front->server_ = builder.BuildAndStart();
  if (front->server_ == nullptr || port == 0) {
    front->server_.reset();
    for (auto& q : queues) {
      // Never used, but a queue must be shut down and drained before it goes.
      q->Shutdown();
      void* tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) {
      }
    }
    return UnavailableError("cannot listen for gRPC on " + options.address +
                            " (address in use or not local?)");
  }
  front->address_ = options.address.substr(0, colon) + ":" + std::to_string(port);
  for (int i = 0; i < options.threads; ++i) {
    front->workers_.push_back(std::make_unique<Worker>(
        i, service, async_service, std::move(queues[i]), options, &front->metrics_->block(i)));
  }
  for (auto& w : front->workers_) {
    front->threads_.emplace_back([worker = w.get()] { worker->Run(); });
  }
  return front;
}

GrpcFront::~GrpcFront() {
  Stop();
  // The server before the queues it was given (as gRPC's examples order
  // them), the service it serves last (a member declared before both).
  server_.reset();
  credentials_.reset();
  workers_.clear();
}

void GrpcFront::Stop() {
  std::call_once(stopped_, [this] {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(drain_timeout_ms_));
    server_->Wait();
    for (auto& w : workers_) w->ShutdownQueue();
    for (auto& t : threads_) t.join();
  });
}

}  // namespace floodgate::server
