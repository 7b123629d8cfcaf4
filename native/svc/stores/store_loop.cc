#include "svc/stores/store_loop.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <system_error>

#include "core/clock.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/memcached_client.h"
#include "svc/stores/reconnect_backoff.h"
#include "svc/stores/redis_client.h"

namespace tailscope::svc::stores {

void LoopRegistration::attach(int fd, uint32_t interest) {
  detach();
  ++generation_;
  fd_ = fd;
  interest_ = interest;
  events_.add(fd, token_now(), interest);
}

void LoopRegistration::want(uint32_t interest) {
  if (fd_ < 0 || interest == interest_) return;
  interest_ = interest;
  events_.modify(fd_, token_now(), interest);
}

void LoopRegistration::detach() {
  if (fd_ < 0) return;
  try {
    events_.remove(fd_);
  } catch (const std::system_error&) {
    // Already closed by the library: the kernel removed it from the poller.
  }
  fd_ = -1;
  interest_ = 0;
}

StoreLoop::StoreLoop(StoreSet& set, net::EventLoop& events, uint64_t token_bits, size_t docstore_connections)
    : set_(set),
      events_(events),
      token_bits_(token_bits),
      docstore_connections_(std::max<size_t>(1, docstore_connections)) {}

StoreLoop::~StoreLoop() { close(); }

LoopRegistration* StoreLoop::registration(AsyncStoreClient* owner, size_t sub) {
  const uint64_t slot = slots_.size();  // < 16 clients' registrations: far below the 16 bits
  const uint64_t base = net::LoopDriven::kTokenTag | token_bits_ | slot;
  slots_.push_back(Slot{std::make_unique<LoopRegistration>(events_, base), owner, sub});
  return slots_.back().reg.get();
}

AsyncStoreClient* StoreLoop::client(StoreSystem system) {
  auto& c = clients_[static_cast<size_t>(system)];
  if (c) return c.get();
  const StoreAddress* a = set_.address(system);
  if (!a) return nullptr;
  // The registrations are made before the client that owns them; the owner is filled in after.
  const size_t first = slots_.size();
  switch (system) {
    case StoreSystem::kMemcached:
      c = make_memcached_async(*a, *registration(nullptr, 0));
      break;
    case StoreSystem::kRedis:
      c = make_redis_async(*a, *registration(nullptr, 0));
      break;
    case StoreSystem::kMongodb: {
      std::vector<LoopRegistration*> regs;
      for (size_t i = 0; i < docstore_connections_; ++i) regs.push_back(registration(nullptr, i));
      c = make_docstore_async(*a, set_.timeout_ns(), regs);
      break;
    }
    case StoreSystem::kNone:
      return nullptr;
  }
  for (size_t i = first; i < slots_.size(); ++i) slots_[i].owner = c.get();
  return c.get();
}

void StoreLoop::run(StoreSystem system, const StoreRequest& request, StoreDone done) {
  auto counted = [this, system, done = std::move(done)](const StoreResult& r) {
    set_.count(system, r);
    done(r);
  };
  if (closed_) return counted(unavailable("store client closed"));
  AsyncStoreClient* c = client(system);
  if (!c) return counted(unavailable(std::string("no --store-addr for ") + system_name(system)));
  c->run(request, monotonic_ns() + set_.timeout_ns(), std::move(counted));
}

void StoreLoop::run_batch(StoreSystem system, std::vector<StoreRequest> requests, StoreDone done) {
  if (requests.empty()) return done(StoreResult{StoreStatus::kOk});
  // Loop thread only: the results and the count of those left need no lock.
  struct Batch {
    std::vector<StoreResult> results;
    size_t left;
    StoreDone done;
  };
  auto batch =
      std::make_shared<Batch>(Batch{std::vector<StoreResult>(requests.size()), requests.size(), std::move(done)});
  for (size_t i = 0; i < requests.size(); ++i)
    run(system, requests[i], [batch, i](const StoreResult& r) {
      batch->results[i] = r;
      if (--batch->left == 0) batch->done(combine_results(batch->results));
    });
}

void StoreLoop::on_ready(const net::ReadyEvent& e) {
  const size_t slot = static_cast<size_t>(e.token & 0xffff);
  if (slot >= slots_.size()) return;
  Slot& s = slots_[slot];
  // A stale event (its descriptor closed earlier in this batch) is dropped.
  if (s.owner && s.reg->current(e.token)) s.owner->on_ready(s.sub, e.ready);
}

int64_t StoreLoop::service() {
  int64_t due_ns = INT64_MAX;
  const int64_t now = monotonic_ns();
  for (auto& c : clients_)
    if (c) due_ns = std::min(due_ns, c->service(now));
  return due_ns;
}

void StoreLoop::close() {
  closed_ = true;
  for (auto& c : clients_)
    if (c) c->close("store client closed");
}

nlohmann::json StoreLoop::policy_json(size_t docstore_connections) {
  return {{"policy",
           "per event loop and store system: one pipelined connection to memcached and to redis, a bounded set "
           "to the document store (one query in flight each); opened on demand, " +
               ReconnectBackoff::policy()},
          {"memcached_connections_per_loop", 1},
          {"redis_connections_per_loop", 1},
          {"docstore_connections_per_loop", docstore_connections}};
}

}  // namespace tailscope::svc::stores
