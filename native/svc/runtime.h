// What every concurrency model shares: the service's place in the topology,
// its clients to downstream services, counters, and the request / call /
// store-operation lifecycle (trace context, spans, probe, response). A model
// file only decides *how* the stages of an endpoint are launched and joined.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "svc/blocking_client_pool.h"
#include "svc/capacity_limit.h"
#include "svc/multiplexed_channel.h"
#include "svc/server.h"
#include "svc/stores/store_loop.h"
#include "svc/stores/store_set.h"
#include "svc/timer_service.h"
#include "svc/topology.h"
#include "svc/tracer.h"
#include "svc/transport.h"

namespace tailscope::svc {

struct RuntimeOptions {
  std::string model = "coroutine";
  size_t workers = 0;                  // pool-blocking / pool-callback processing threads (0 = model default)
  size_t loops = 0;                    // coroutine event loops (0 = online CPUs); pool-* IO dispatchers (0 = 1)
  size_t queue_capacity = 1024;        // pools: queued requests; coroutine: in-flight requests per loop
  size_t channel_connections = 2;      // multiplexed connections per downstream service
  size_t pool_max_connections = 1024;  // DeathStarBench-style client pool size per downstream
  // Blocking client pools (std-async, std-thread) and the real stores' blocking
  // pools (thread models): a connection idle this long is closed. Without it a pool keeps a burst's high-water mark of
  // connections — and the callee one thread per connection — for the rest of the run.
  int64_t pool_idle_timeout_ns = 10'000'000'000;
  int64_t call_timeout_ns = 0;  // 0 = the topology's call_timeout_ms
  // Where downstream services live: service → numeric address (--peers, a
  // deployment). A service not listed is on 127.0.0.1. Ports come from the
  // `ports` map (or the topology).
  std::map<std::string, std::string> peer_hosts;
  // The link-delay shim, by remote address: requests to a peer at an address
  // listed here, and answers to a caller connecting from one, are held.
  LinkDelayTable link_delays;
  // Real stores (docs/stores.md): when set, a store stage with an `op` runs
  // against the server at store_addresses[system]; otherwise it waits its
  // simulated latency. The thread models use the blocking pools
  // (store_pool_connections), the event-loop models a StoreLoop per loop
  // (store_loop_docstore_connections; svc/stores/store_loop.h).
  bool real_stores = false;
  std::map<StoreSystem, stores::StoreAddress> store_addresses;
  size_t store_pool_connections = 64;  // blocking pool: connections per store system
  size_t store_loop_docstore_connections = stores::kDocstoreConnectionsPerLoop;  // per event loop
  int64_t store_timeout_ns = 0;                                                  // 0 = the call timeout
  // `--work simulated`: a work stage with a `simulated_cpu` burns a draw from
  // it (the busy loop it replaced) instead of doing its real work (work_stage.h).
  bool simulated_work = false;
};

// One request being handled: the server span and the trace context its children inherit.
struct RequestScope {
  InboundRequest request;
  const Endpoint* endpoint = nullptr;
  SpanRecord span;                    // the server span
  RpcStatus status = RpcStatus::kOk;  // the first failure decides the answer
  void fail(RpcStatus s) {
    if (status == RpcStatus::kOk) status = s;
  }
  bool sampled = false;
  // The request's common factor of correlated stage delays, from its trace id
  // (request_factor.h): every simulated draw of the request passes it.
  RequestFactor factor;
  // Real stores: the ids the last store stage drew, and those an on_miss runs with (the missed key's).
  stores::StoreDraw last_draw;
  std::optional<stores::StoreDraw> miss_draw;
  // The follower list a stage read (`yields: followers`: a store read or a
  // call's answer), for a later fan-out or the answer (`response: followers`).
  std::optional<std::vector<int64_t>> followers;
};

// One downstream call: its client span (with the probe when async/deferred),
// the context sent to the callee, and the request payload.
struct CallScope {
  const CallSpec* spec = nullptr;
  SpanRecord span;
  TraceContext child;
  std::string payload;
  RpcStatus result = RpcStatus::kOk;
  // The slot of a group's max_in_flight window this call holds (thread
  // models); given back when the call ends (ServiceRuntime::release_group_slot).
  std::shared_ptr<CapacityLimit> group_slot;
  // The answer's payload, kept only when the call `yields` a list (end_call reads it).
  std::string response;
  exec::AsyncProbe& probe() { return span.probe; }
  // What every model does with an answer: its status, and its payload when needed.
  void take_answer(CallResult&& r) {
    result = r.status;
    if (spec->yields != IdList::kNone) response = std::move(r.payload);
  }
};

class ServiceRuntime {
 public:
  ServiceRuntime(const Topology& topology, const std::string& service, const std::map<std::string, int>& ports,
                 RuntimeOptions options, TimerService& timers);
  ~ServiceRuntime();

  const Topology& topology() const { return topology_; }
  const Service& service() const { return service_; }
  const RuntimeOptions& options() const { return options_; }
  ServiceCounters& counters() { return counters_; }
  TimerService& timers() { return timers_; }
  int64_t call_timeout_ns() const { return call_timeout_ns_; }

  // Starts a request: resolves the endpoint (answers kUnknownMethod itself and
  // returns nullopt when there is none), starts the trace at the front.
  std::optional<RequestScope> begin(InboundRequest&& request);
  // Answers the request with rs.status and records the server span.
  void finish(RequestScope& rs);
  // Answers kRejected without running anything (a full queue).
  void reject(InboundRequest&& request);

  std::unique_ptr<CallScope> begin_call(const RequestScope& rs, const CallSpec& spec);
  // Records the client span (from the probe's fn_start/fn_end when it has
  // one) and folds a failure into rs.
  void end_call(RequestScope& rs, CallScope& call);

  // Simulated store/cache operations: the span is recorded by end_store.
  SpanRecord begin_store(const RequestScope& rs, const StoreOp& op);
  void end_store(SpanRecord& span);
  // Whether on_miss runs: real ops miss when the read found nothing
  // (real_missed), simulated ones with probability 1 − hit_ratio.
  bool store_missed(const StoreOp& op, bool real_missed = false);

  // Real store operations (the run's store mode is real and the stage has an op).
  bool store_is_real(const StoreOp& op) const { return stores_ && op.real(); }
  stores::StoreSet* store_set() { return stores_.get(); }
  // The request for one repetition of a real op: fresh ids, or the missed
  // stage's inside its on_miss; remembered in rs.last_draw.
  stores::StoreRequest store_request(RequestScope& rs, const StoreOp& op);
  // The blocking form (thread models): runs it on a pooled connection.
  stores::StoreResult run_store_blocking(RequestScope& rs, const StoreOp& op);
  // The non-blocking form (event-loop models): the store clients of one event
  // loop, driven by it (token_bits: from net::LoopDrivers::add); null in
  // simulated store mode. The caller owns it and keeps it until its loop stops.
  std::unique_ptr<stores::StoreLoop> make_store_loop(net::EventLoop& events, uint64_t token_bits);
  // The event-loop models' connection policy (their describe()); null in simulated store mode.
  nlohmann::json store_loop_policy() const;
  // Folds an outcome into the span and the request (unavailable fails it; the
  // ids of a read that `yields` become rs.followers); counted by the StoreSet.
  // True when it was a miss.
  bool complete_store(RequestScope& rs, const StoreOp& op, SpanRecord& span, const stores::StoreResult& r);
  // A follower fan-out stage (`members` / `for_each`, docs/stores.md): whom it
  // writes to — the request's follower list, else the generated social graph's
  // followers of the drawn {user} (social_graph.h), so simulated stores fan
  // out by the same degrees — and, with real stores, its requests (none for
  // an empty list). Drawn once per stage run; the span gets the count.
  struct FanOut {
    int64_t followers = 0;
    std::vector<stores::StoreRequest> requests;
    RequestFactor factor;  // the request's
    // Simulated: one draw for the pipelined round trip; no round trip for nobody.
    int64_t simulated_ns(const StoreOp& op) const { return followers > 0 ? op.latency.sample_ns(factor) : 0; }
  };
  FanOut fan_out(RequestScope& rs, const StoreOp& op, SpanRecord& span);
  // The blocking form (thread models): the batch on one pooled connection, pipelined.
  stores::StoreResult run_fan_out_blocking(const StoreOp& op, const FanOut& fan);
  // Around an on_miss: its stages reuse the missed stage's draw.
  std::optional<stores::StoreDraw> enter_miss(RequestScope& rs) {
    auto saved = rs.miss_draw;
    rs.miss_draw = rs.last_draw;
    return saved;
  }
  void leave_miss(RequestScope& rs, std::optional<stores::StoreDraw> saved) { rs.miss_draw = saved; }
  // "real" or "simulated" and why: what the per-service document records.
  const std::string& store_mode() const { return store_mode_; }
  const std::string& store_reason() const { return store_reason_; }
  void set_store_mode(std::string mode, std::string reason) {
    store_mode_ = std::move(mode);
    store_reason_ = std::move(reason);
  }

  // Downstream clients (created on first use, live as long as the runtime).
  // Every multiplexed channel of the service shares one ChannelLoop.
  MultiplexedChannel& channel(const std::string& service);
  // A channel to `service` on a model's own loop (coroutine: one driven by
  // each of its event loops). The caller owns it, closes it before the loop
  // stops, and counts the loop in channel_stats() with count_channel_loop.
  // Closed at once when close_clients() has already run.
  std::unique_ptr<MultiplexedChannel> make_channel(const std::string& service, ChannelLoop& loop);
  // `loop` must outlive every later channel_stats().
  void count_channel_loop(const ChannelLoop* loop);
  BlockingClientPool& client_pool(const std::string& service);
  // The blocking call std-async and std-thread make (DeathStarBench's ClientPool).
  RpcStatus call_via_client_pool(CallScope& call);

  // Fails the calls in flight (kUnavailable), refuses new ones and stops the channel loop.
  void close_clients();
  // The channel loops' counters (iterations, sends, late responses), summed over the
  // runtime's own loop and those counted with count_channel_loop; zeros before the first channel.
  nlohmann::json channel_stats();
  // Where a downstream service is called: its numeric address.
  const std::string& host_of(const std::string& service) const;

  // The service's capacity limiters (Service::capacities), made once at start:
  // a stage's `limit_index` gives its own; nullptr for -1 (no capacity).
  CapacityLimit* limit(int index) const { return index < 0 ? nullptr : limits_[static_cast<size_t>(index)].get(); }
  // Per limiter: kind, name and its counters (the result document's "capacities").
  nlohmann::json capacities_json() const;
  // A wait for a slot that reached the call timeout: the request fails with a
  // timeout, as a call would; the span (when given) records it.
  void fail_wait(RequestScope& rs);
  void mark_wait_timeout(SpanRecord& span);
  // Gives back the call's max_in_flight window slot, once (thread models).
  void release_group_slot(CallScope& call) {
    if (call.group_slot) std::exchange(call.group_slot, nullptr)->release();
  }

  // The stages that compute on the calling thread (cpu, work), the same in every model.
  void run_compute(const Stage& stage, const RequestFactor& factor);
  // The work stages' own CPU (the thread's CPU clock around each): {mode,
  // stages, simulated_stages, cpu_ns} — what a call's work cost, real or
  // simulated, without the transport around it (the socialnet study's
  // real ÷ simulated CPU per call).
  nlohmann::json work_json() const;

  // Set once when the service starts shutting down: simulated stages (cpu
  // burns, blocking store waits) end early, so stopping never waits out a
  // long stage. Models pass it to burn_cpu_ns / blocking_wait_ns.
  const std::atomic<bool>& stopping() const { return stopping_; }
  void request_stop() { stopping_.store(true); }

 private:
  int port_of(const std::string& service) const;
  // Caller holds clients_mu_.
  std::unique_ptr<MultiplexedChannel> new_channel_locked(const std::string& service, ChannelLoop& loop);
  const Topology& topology_;
  const Service& service_;
  std::map<std::string, int> ports_;
  RuntimeOptions options_;
  TimerService& timers_;
  int64_t call_timeout_ns_;
  // The topology has correlated stages: the front gives every request a trace
  // id, unsampled ones too, as the request's common factor derives from it, and
  // only then is the factor computed (request_factor.h).
  const bool ids_for_every_request_;
  ServiceCounters counters_;
  std::mutex clients_mu_;
  std::unique_ptr<ChannelLoop> channel_loop_;  // declared first: it outlives the channels it serves
  std::map<std::string, std::unique_ptr<MultiplexedChannel>> channels_;
  std::vector<const ChannelLoop*> counted_loops_;  // guarded by clients_mu_
  std::map<std::string, std::unique_ptr<BlockingClientPool>> pools_;
  bool clients_closed_ = false;  // guarded by clients_mu_
  std::string store_span_kind_;
  std::unique_ptr<stores::StoreSet> stores_;  // real store mode only
  std::string store_mode_ = "simulated", store_reason_;
  std::atomic<bool> stopping_{false};
  std::vector<std::shared_ptr<CapacityLimit>> limits_;  // indexed as Service::capacities
  std::atomic<int64_t> work_stages_{0}, work_simulated_{0}, work_cpu_ns_{0};
};

// Blocks the calling thread for a simulated store latency (the blocking models'
// store client, like DeathStarBench's MongoDB/Memcached clients); returns
// early once `stop` is set.
void blocking_wait_ns(int64_t ns, const std::atomic<bool>& stop);

class ConcurrencyModel {
 public:
  virtual ~ConcurrencyModel() = default;
  virtual std::string_view name() const = 0;
  virtual void start(ServiceRuntime& rt, ListenSpec listen) = 0;
  virtual void stop() = 0;                      // stops serving and joins every thread it started
  virtual nlohmann::json describe() const = 0;  // threads, queue sizes, counters of its own
};

std::unique_ptr<ConcurrencyModel> make_std_async_model();
std::unique_ptr<ConcurrencyModel> make_std_thread_model();
std::unique_ptr<ConcurrencyModel> make_pool_blocking_model();
std::unique_ptr<ConcurrencyModel> make_pool_callback_model();
std::unique_ptr<ConcurrencyModel> make_coroutine_model();
// Whether a model reaches real stores: the thread models through blocking
// clients, the event-loop models through non-blocking ones on their loops.
// A model without would keep the simulated waits and record why.
bool model_has_store_clients(std::string_view model);
// Throws std::invalid_argument naming the model and the known ones.
std::unique_ptr<ConcurrencyModel> make_model(std::string_view name);
// Every name make_model knows, in registry order (tailscope-svc --list-models).
const std::vector<std::string>& model_names();

// One running service: runtime + model + listener.
class ServiceInstance {
 public:
  // listen_fd: an open listening socket (kept open by the caller).
  ServiceInstance(const Topology& topology, const std::string& service, const std::map<std::string, int>& ports,
                  RuntimeOptions options, int listen_fd, TimerService& timers);
  ~ServiceInstance();
  void start();
  void stop();
  nlohmann::json result() const;
  ServiceRuntime& runtime() { return *runtime_; }

 private:
  std::unique_ptr<ServiceRuntime> runtime_;
  std::unique_ptr<ConcurrencyModel> model_;
  std::unique_ptr<HttpRoute> route_;
  ListenSpec listen_;
  bool started_ = false, stopped_ = false;
};

}  // namespace tailscope::svc
