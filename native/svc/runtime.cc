#include "svc/runtime.h"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/clock.h"
#include "svc/stores/social_graph.h"

namespace tailscope::svc {
namespace {

std::mt19937_64& rng() {
  thread_local std::mt19937_64 g(std::random_device{}());
  return g;
}

const char* launch_name(CallSpec::Launch l) {
  switch (l) {
    case CallSpec::Launch::kAsync:
      return "async";
    case CallSpec::Launch::kDeferred:
      return "deferred";
    case CallSpec::Launch::kSync:
      return "sync";
  }
  return "sync";
}

}  // namespace

void blocking_wait_ns(int64_t ns, const std::atomic<bool>& stop) {
  // The default 50 µs timer slack would add half a simulated cache hit; the
  // timer thread of the non-blocking models runs with 1 ns slack too.
  thread_local bool slack_set = (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0), true);
  (void)slack_set;
  if (ns <= 0) return;
  // Sleeps in slices of at most kStopCheckNs so a shutdown is seen within
  // one slice; the last slice still ends exactly at the deadline, and the
  // usual µs-scale waits are a single sleep.
  constexpr int64_t kStopCheckNs = 20'000'000;
  const int64_t deadline = monotonic_ns() + std::min(ns, kMaxStageNs);
  for (int64_t now = monotonic_ns(); now < deadline && !stop.load(std::memory_order_relaxed); now = monotonic_ns())
    sleep_until_ns(std::min(deadline, now + kStopCheckNs));
}

ServiceRuntime::ServiceRuntime(const Topology& topology, const std::string& service,
                               const std::map<std::string, int>& ports, RuntimeOptions options, TimerService& timers)
    : topology_(topology),
      service_(topology.service(service)),
      ports_(ports),
      options_(std::move(options)),
      timers_(timers),
      call_timeout_ns_(options_.call_timeout_ns > 0 ? options_.call_timeout_ns : topology.call_timeout_ns),
      ids_for_every_request_(topology.has_shared_stages()) {
  if (options_.real_stores) {
    stores_ = std::make_unique<stores::StoreSet>(
        options_.store_addresses, options_.store_timeout_ns > 0 ? options_.store_timeout_ns : call_timeout_ns_,
        options_.store_pool_connections, options_.pool_idle_timeout_ns);
    store_mode_ = "real";
  }
  for (const CapacitySpec& c : service_.capacities) limits_.push_back(std::make_shared<CapacityLimit>(c.capacity));
}

nlohmann::json ServiceRuntime::capacities_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < limits_.size(); ++i) {
    nlohmann::json c = limits_[i]->counters_json();
    c["kind"] = capacity_kind_name(service_.capacities[i].kind);
    c["name"] = service_.capacities[i].name;
    out.push_back(std::move(c));
  }
  return out;
}

void ServiceRuntime::fail_wait(RequestScope& rs) {
  counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
  rs.fail(RpcStatus::kTimeout);
}

void ServiceRuntime::mark_wait_timeout(SpanRecord& span) {
  span.error = true;
  span.status = RpcStatus::kTimeout;
}

ServiceRuntime::~ServiceRuntime() { close_clients(); }

void ServiceRuntime::close_clients() {
  std::lock_guard lock(clients_mu_);
  for (auto& [_, c] : channels_) c->close();
  for (auto& [_, p] : pools_) p->close();
  // Waiters for a slot fail now (resumed on their own loops, which still run).
  for (auto& l : limits_) l->close();
  if (channel_loop_) channel_loop_->stop();
  clients_closed_ = true;
}

nlohmann::json ServiceRuntime::channel_stats() {
  std::lock_guard lock(clients_mu_);
  std::vector<const ChannelLoop*> loops = counted_loops_;
  if (channel_loop_) loops.push_back(channel_loop_.get());
  int64_t iterations = 0, sends = 0, late = 0, delayed = 0;
  for (const ChannelLoop* l : loops) {
    iterations += l->iterations();
    sends += l->sends();
    late += l->late_responses();
    delayed += l->delayed_batches();
  }
  return {{"loop_iterations", iterations}, {"sends", sends}, {"late_responses", late}, {"delayed_batches", delayed}};
}

void ServiceRuntime::count_channel_loop(const ChannelLoop* loop) {
  std::lock_guard lock(clients_mu_);
  counted_loops_.push_back(loop);
}

std::unique_ptr<MultiplexedChannel> ServiceRuntime::make_channel(const std::string& service, ChannelLoop& loop) {
  std::lock_guard lock(clients_mu_);
  return new_channel_locked(service, loop);
}

std::unique_ptr<MultiplexedChannel> ServiceRuntime::new_channel_locked(const std::string& service, ChannelLoop& loop) {
  const std::string& host = host_of(service);
  auto c = std::make_unique<MultiplexedChannel>(host, port_of(service), options_.channel_connections, timers_, loop,
                                                options_.link_delays.for_address(host));
  // A handler still running after shutdown began gets a closed channel: its
  // calls fail at once instead of waiting on a loop that no longer runs.
  if (clients_closed_) c->close();
  return c;
}

void ServiceRuntime::run_compute(const Stage& stage, const RequestFactor& factor) {
  if (stage.kind == Stage::Kind::kCpu) burn_cpu_ns(stage.cpu.sample_ns(factor), stopping_);
  if (stage.kind != Stage::Kind::kWork) return;
  // Two reads of the thread's CPU clock per work stage (a system call each,
  // ~0.2 µs): the stage's own CPU, which /proc's per-process figure mixes
  // with the transport's. cpu: stages are not timed (their CPU is their budget).
  const bool simulated = options_.simulated_work && stage.work.simulated_cpu;
  // The input is built once per thread (a thread-per-connection model makes
  // threads all run long): outside the timed part, as it is outside the work.
  if (!simulated) work_input_for(stage.work.kind, stage.work.bytes);
  const int64_t cpu_start = thread_cpu_ns();
  if (simulated) {
    burn_cpu_ns(stage.work.simulated_cpu->sample_ns(factor), stopping_);
    work_simulated_.fetch_add(1, std::memory_order_relaxed);
  } else {
    run_work(stage.work);
  }
  work_cpu_ns_.fetch_add(thread_cpu_ns() - cpu_start, std::memory_order_relaxed);
  work_stages_.fetch_add(1, std::memory_order_relaxed);
}

nlohmann::json ServiceRuntime::work_json() const {
  return {{"mode", options_.simulated_work ? "simulated" : "real"},
          {"stages", work_stages_.load()},
          {"simulated_stages", work_simulated_.load()},
          {"cpu_ns", work_cpu_ns_.load()}};
}

int ServiceRuntime::port_of(const std::string& service) const {
  auto it = ports_.find(service);
  if (it != ports_.end()) return it->second;
  const int port = topology_.service(service).port;
  if (port <= 0) throw std::invalid_argument("service '" + service + "' has no port (topology port or --ports)");
  return port;
}

const std::string& ServiceRuntime::host_of(const std::string& service) const {
  static const std::string kLoopback = "127.0.0.1";
  auto it = options_.peer_hosts.find(service);
  return it == options_.peer_hosts.end() ? kLoopback : it->second;
}

MultiplexedChannel& ServiceRuntime::channel(const std::string& service) {
  std::lock_guard lock(clients_mu_);
  auto& c = channels_[service];
  if (!c) {
    if (!channel_loop_) channel_loop_ = std::make_unique<ChannelLoop>();
    c = new_channel_locked(service, *channel_loop_);
  }
  return *c;
}

BlockingClientPool& ServiceRuntime::client_pool(const std::string& service) {
  std::lock_guard lock(clients_mu_);
  auto& p = pools_[service];
  if (!p) {
    const std::string& host = host_of(service);
    p = std::make_unique<BlockingClientPool>(host, port_of(service), options_.pool_max_connections,
                                             options_.link_delays.for_address(host), options_.pool_idle_timeout_ns);
  }
  return *p;
}

std::optional<RequestScope> ServiceRuntime::begin(InboundRequest&& request) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  auto it = service_.endpoints.find(request.method);
  if (it == service_.endpoints.end()) {
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    request.conn->respond(request.id, RpcStatus::kUnknownMethod, "");
    return std::nullopt;
  }
  RequestScope rs;
  rs.endpoint = &it->second;
  TraceContext ctx = request.trace;
  if (request.from_http) {  // the front makes the sampling decision (its own rate, not the caller's flag)
    ctx.sampled = Tracer::sample_root();
    // and starts the trace, unless a traceparent came: then continues it. An
    // unsampled request draws no ids (nothing will carry them: tracer_benchmark
    // put the draws at over half of an unsampled request's tracing cost),
    // unless its stages' common factor needs one (request_factor.h).
    if (!request.trace_from_header && (ctx.sampled || ids_for_every_request_)) {
      ctx.trace_id_high = Tracer::new_id();
      ctx.trace_id_low = Tracer::new_id();
    }
    // The front's span stays the root: a caller that sent a traceparent
    // (tailscope-load) records no span, and a parent missing from every
    // trace would make the analyzer call each one orphaned.
    ctx.parent_span_id = 0;
  }
  rs.sampled = ctx.sampled;
  rs.span.trace_id_high = ctx.trace_id_high;
  rs.span.trace_id_low = ctx.trace_id_low;
  // The common factor (a hash, log, sqrt and erfc) only where a stage uses it:
  // every other request's timed path does not pay for it.
  if (ids_for_every_request_) rs.factor = request_factor(ctx.trace_id_high, ctx.trace_id_low);
  rs.span.parent_span_id = ctx.parent_span_id;
  rs.span.span_id = rs.sampled ? Tracer::new_id() : 0;
  rs.span.service = &service_.name;
  rs.span.operation = &rs.endpoint->server_span;
  rs.span.role = SpanRole::kServer;
  rs.span.start_ns = request.received_ns ? request.received_ns : monotonic_ns();
  rs.request = std::move(request);
  return rs;
}

void ServiceRuntime::finish(RequestScope& rs) {
  if (rs.status == RpcStatus::kOk) {
    counters_.ok.fetch_add(1, std::memory_order_relaxed);
    // `response: followers` answers with the list the request read (simulated stores read none: filler).
    if (rs.endpoint->response == IdList::kFollowers && rs.followers)
      rs.request.conn->respond(rs.request.id, RpcStatus::kOk, stores::encode_followers(*rs.followers));
    else
      rs.request.conn->respond(rs.request.id, RpcStatus::kOk, std::string(rs.endpoint->response_bytes, 'r'));
  } else {
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    rs.request.conn->respond(rs.request.id, rs.status, "");
  }
  if (rs.sampled) {
    rs.span.end_ns = monotonic_ns();
    rs.span.status = rs.status;
    rs.span.error = rs.status != RpcStatus::kOk;
    Tracer::record(rs.span);
  }
  rs.request.conn.reset();
}

void ServiceRuntime::reject(InboundRequest&& request) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  counters_.rejections.fetch_add(1, std::memory_order_relaxed);
  counters_.errors.fetch_add(1, std::memory_order_relaxed);
  request.conn->respond(request.id, RpcStatus::kRejected, "");
}

std::unique_ptr<CallScope> ServiceRuntime::begin_call(const RequestScope& rs, const CallSpec& spec) {
  auto c = std::make_unique<CallScope>();
  c->spec = &spec;
  c->span.trace_id_high = rs.span.trace_id_high;
  c->span.trace_id_low = rs.span.trace_id_low;
  c->span.parent_span_id = rs.span.span_id;
  c->span.span_id = rs.sampled ? Tracer::new_id() : 0;
  c->span.service = &service_.name;
  c->span.operation = &spec.span;
  c->span.role = SpanRole::kClient;
  c->span.launch = launch_name(spec.launch);
  c->span.has_probe = spec.launch != CallSpec::Launch::kSync;
  c->span.probe.deferred = spec.launch == CallSpec::Launch::kDeferred;
  c->span.start_ns = monotonic_ns();
  c->child = TraceContext{rs.span.trace_id_high, rs.span.trace_id_low, c->span.span_id, rs.sampled};
  c->payload.assign(spec.request_bytes, 'q');
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  return c;
}

void ServiceRuntime::end_call(RequestScope& rs, CallScope& call) {
  if (call.result != RpcStatus::kOk) {
    counters_.downstream_failures.fetch_add(1, std::memory_order_relaxed);
    if (call.result == RpcStatus::kTimeout) counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
    // The caller fails with what happened below it: a timeout stays a timeout (the front answers 504).
    rs.fail(call.result == RpcStatus::kTimeout || call.result == RpcStatus::kRejected ? call.result
                                                                                      : RpcStatus::kUnavailable);
  } else if (call.spec->yields == IdList::kFollowers) {
    // The callee's follower list; filler (its stores simulated) leaves the request without one.
    if (auto ids = stores::decode_followers(call.response)) rs.followers = std::move(*ids);
  }
  if (!rs.sampled) return;
  // DeathStarBench opens the client span inside the async function: it covers
  // the call itself, from fn_start to fn_end; the probe holds the rest.
  if (call.span.has_probe && call.probe().fn_start_ns && call.probe().fn_end_ns) {
    call.span.start_ns = call.probe().fn_start_ns;
    call.span.end_ns = call.probe().fn_end_ns;
  } else if (!call.span.end_ns) {
    call.span.end_ns = monotonic_ns();
  }
  call.span.status = call.result;
  call.span.error = call.result != RpcStatus::kOk;
  Tracer::record(call.span);
}

SpanRecord ServiceRuntime::begin_store(const RequestScope& rs, const StoreOp& op) {
  SpanRecord s;
  s.trace_id_high = rs.span.trace_id_high;
  s.trace_id_low = rs.span.trace_id_low;
  s.parent_span_id = rs.span.span_id;
  s.span_id = rs.sampled ? Tracer::new_id() : 0;
  s.service = &service_.name;
  s.operation = &op.span;
  s.role = SpanRole::kClient;
  if (store_is_real(op)) {
    s.db_system = stores::db_system_tag(op.real_system);
    if (op.real_system == StoreSystem::kMongodb) s.store_role = "mongodb";
  }
  s.start_ns = monotonic_ns();
  return s;
}

stores::StoreRequest ServiceRuntime::store_request(RequestScope& rs, const StoreOp& op) {
  rs.last_draw = rs.miss_draw ? *rs.miss_draw : stores::draw_store_ids(store_verb_writes(op.op));
  return stores::make_request(op, rs.last_draw);
}

stores::StoreResult ServiceRuntime::run_store_blocking(RequestScope& rs, const StoreOp& op) {
  return stores_->run_blocking(op.real_system, store_request(rs, op));
}

std::unique_ptr<stores::StoreLoop> ServiceRuntime::make_store_loop(net::EventLoop& events, uint64_t token_bits) {
  if (!stores_) return nullptr;
  return std::make_unique<stores::StoreLoop>(*stores_, events, token_bits, options_.store_loop_docstore_connections);
}

nlohmann::json ServiceRuntime::store_loop_policy() const {
  return stores_ ? stores::StoreLoop::policy_json(options_.store_loop_docstore_connections) : nlohmann::json();
}

ServiceRuntime::FanOut ServiceRuntime::fan_out(RequestScope& rs, const StoreOp& op, SpanRecord& span) {
  rs.last_draw = rs.miss_draw ? *rs.miss_draw : stores::draw_store_ids(store_verb_writes(op.op));
  const std::vector<int64_t>& ids =
      rs.followers ? *rs.followers : stores::social_graph_followers()[static_cast<size_t>(rs.last_draw.user)];
  FanOut out;
  out.factor = rs.factor;
  out.followers = static_cast<int64_t>(ids.size());
  span.followers = out.followers;
  if (!store_is_real(op) || ids.empty()) return out;
  if (op.members != IdList::kNone) {  // one command, every follower a member
    out.requests.push_back(stores::make_request(op, rs.last_draw));
    out.requests.back().members = ids;
    return out;
  }
  out.requests.reserve(ids.size());
  stores::StoreDraw draw = rs.last_draw;  // the same post (and author) in every follower's key
  for (int64_t id : ids) {
    draw.follower = id;
    out.requests.push_back(stores::make_request(op, draw));
  }
  return out;
}

stores::StoreResult ServiceRuntime::run_fan_out_blocking(const StoreOp& op, const FanOut& fan) {
  return stores::combine_results(stores_->run_blocking_batch(op.real_system, fan.requests));
}

bool ServiceRuntime::complete_store(RequestScope& rs, const StoreOp& op, SpanRecord& span,
                                    const stores::StoreResult& r) {
  if (op.yields == IdList::kFollowers && r.status == stores::StoreStatus::kOk) rs.followers = r.ids;
  // A read with a miss path says on its span what the server answered: the twin's inference
  // (docs/twin.md) tells the miss path from a sibling stage by it, even when every read missed.
  if (op.on_miss && r.status != stores::StoreStatus::kUnavailable)
    span.cache = r.status == stores::StoreStatus::kMiss ? trace::CacheResult::kMiss : trace::CacheResult::kHit;
  if (r.status == stores::StoreStatus::kUnavailable) {
    // The store is down, refused, slow past the timeout or answered an error:
    // the request fails unavailable; requests that do not need it go on.
    rs.fail(RpcStatus::kUnavailable);
    span.error = true;
    span.status = RpcStatus::kUnavailable;
  }
  return r.status == stores::StoreStatus::kMiss;
}

void ServiceRuntime::end_store(SpanRecord& span) {
  if (span.span_id == 0) return;  // not sampled
  span.end_ns = monotonic_ns();
  Tracer::record(span);
}

bool ServiceRuntime::store_missed(const StoreOp& op, bool real_missed) {
  if (store_is_real(op)) return real_missed;
  if (!op.hit_ratio) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng()) >= *op.hit_ratio;
}

RpcStatus ServiceRuntime::call_via_client_pool(CallScope& call) {
  // The call's capacity (a client-side pool of its span name): the wait is
  // inside the call, so inside its client span.
  CapacityLimit* slot = limit(call.spec->limit_index);
  if (slot && !slot->acquire(monotonic_ns() + call_timeout_ns_)) {
    call.result = RpcStatus::kTimeout;
  } else {
    call.take_answer(
        client_pool(call.spec->service).call(call.spec->endpoint, call.payload, call.child, call_timeout_ns_));
    if (slot) slot->release();
  }
  return call.result;
}

// ---------------------------------------------------------------- models

namespace {

// The registry: every model by the name --model and topologies give it, in
// the order tools list them (tailscope-svc --list-models). Names and
// factories live in one table so a model cannot be listed and not made.
struct ModelEntry {
  std::string_view name;
  std::unique_ptr<ConcurrencyModel> (*make)();
};
constexpr ModelEntry kModels[] = {{"std-async", make_std_async_model},
                                  {"std-thread", make_std_thread_model},
                                  {"pool-blocking", make_pool_blocking_model},
                                  {"pool-callback", make_pool_callback_model},
                                  {"coroutine", make_coroutine_model}};

}  // namespace

bool model_has_store_clients(std::string_view model) {
  // Blocking clients: std-async, std-thread, pool-blocking; on their own loops: pool-callback, coroutine.
  return model == "std-async" || model == "std-thread" || model == "pool-blocking" || model == "pool-callback" ||
         model == "coroutine";
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ModelEntry& m : kModels) out.emplace_back(m.name);
    return out;
  }();
  return names;
}

std::unique_ptr<ConcurrencyModel> make_model(std::string_view name) {
  for (const ModelEntry& m : kModels)
    if (m.name == name) return m.make();
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown concurrency model '" + std::string(name) + "' (known: " + known + ")");
}

ServiceInstance::ServiceInstance(const Topology& topology, const std::string& service,
                                 const std::map<std::string, int>& ports, RuntimeOptions options, int listen_fd,
                                 TimerService& timers) {
  const Service& s = topology.service(service);
  if (!s.model.empty()) options.model = s.model;  // the topology may pin a service's model
  model_ = make_model(options.model);
  // A model without store clients keeps the simulated waits and says so.
  std::string store_reason = options.real_stores ? "" : "store mode simulated";
  if (options.real_stores && !model_has_store_clients(options.model)) {
    options.real_stores = false;
    store_reason = "model " + options.model + " has no store clients: simulated stores";
  }
  runtime_ = std::make_unique<ServiceRuntime>(topology, service, ports, options, timers);
  if (!store_reason.empty()) runtime_->set_store_mode("simulated", store_reason);
  listen_.fd = listen_fd;
  listen_.link_delays = &runtime_->options().link_delays;
  listen_.timers = &timers;
  if (topology.front && topology.front->service == service) {
    route_ = std::make_unique<HttpRoute>(HttpRoute{topology.front->path, topology.front->endpoint, {}});
    for (const FrontRoute& r : topology.front->routes) route_->more.emplace_back(r.path, r.endpoint);
    listen_.kind = WireKind::kHttp;
    listen_.route = route_.get();
  }
}

ServiceInstance::~ServiceInstance() { stop(); }

void ServiceInstance::start() {
  started_ = true;
  model_->start(*runtime_, listen_);
}

void ServiceInstance::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  runtime_->request_stop();   // ends long cpu / store stages the model would otherwise join on
  runtime_->close_clients();  // unblocks handlers waiting on downstream calls
  model_->stop();
}

nlohmann::json ServiceInstance::result() const {
  return {{"service", runtime_->service().name},
          {"model", model_->name()},
          {"wire", listen_.kind == WireKind::kHttp ? "http" : "rpc"},
          {"counters", runtime_->counters().to_json()},
          {"channel", runtime_->channel_stats()},
          {"link_delays", runtime_->options().link_delays.to_json()},
          {"stores", runtime_->store_mode()},
          {"stores_reason", runtime_->store_reason()},
          {"store_counters", runtime_->store_set() ? runtime_->store_set()->counters_json() : nlohmann::json::object()},
          {"capacities", runtime_->capacities_json()},
          {"work", runtime_->work_json()},
          {"model_details", model_->describe()}};
}

}  // namespace tailscope::svc
