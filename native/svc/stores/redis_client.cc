#include "svc/stores/redis_client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <charconv>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/clock.h"
#include "svc/stores/reconnect_backoff.h"

namespace tailscope::svc::stores {
namespace {

timeval to_timeval(int64_t ns) { return timeval{static_cast<time_t>(ns / 1'000'000'000), (ns % 1'000'000'000) / 1000}; }

// The command an op sends, the same for both clients; empty when Redis has no such op.
std::vector<std::string> redis_command(const StoreRequest& r) {
  const std::string member = std::to_string(r.member);
  switch (r.op) {
    case StoreVerb::kGet:
      return {"GET", r.key};
    case StoreVerb::kSet:
      return {"SET", r.key, store_payload(r.value_bytes)};
    case StoreVerb::kZadd: {
      // The score orders a timeline by recency; the member is the post id. A
      // list (`members`): every id a member scored by itself, as the social
      // graph's cache of a user's followers.
      if (r.members.empty()) return {"ZADD", r.key, member, member + ":" + store_payload(r.value_bytes)};
      std::vector<std::string> args{"ZADD", r.key};
      for (int64_t id : r.members) args.insert(args.end(), 2, std::to_string(id));
      return args;
    }
    case StoreVerb::kZrevrange:
      return {"ZREVRANGE", r.key, "0", std::to_string(r.limit - 1)};
    case StoreVerb::kSadd: {
      if (r.members.empty()) return {"SADD", r.key, member};
      std::vector<std::string> args{"SADD", r.key};
      for (int64_t id : r.members) args.push_back(std::to_string(id));
      return args;
    }
    case StoreVerb::kSmembers:
      return {"SMEMBERS", r.key};
    default:
      return {};
  }
}

// The command sent right behind an op's own, in the same round trip: a zadd's
// trim to its `keep` highest scores (the newest posts) — a capped timeline, as
// a real timeline service keeps one. Empty (no allocation) for every other op.
// The op's outcome is its own reply's, unless the trim's is an error
// (redis_step_result).
std::vector<std::string> redis_trim_command(const StoreRequest& r) {
  if (r.op != StoreVerb::kZadd || r.keep <= 0) return {};
  return {"ZREMRANGEBYRANK", r.key, "0", std::to_string(-static_cast<int64_t>(r.keep) - 1)};
}

StoreResult no_such_op(const StoreRequest& r) {
  return {StoreStatus::kUnavailable, std::string("redis has no op ") + store_verb_name(r.op)};
}

// A reply's outcome, the same for both clients: an error reply is unavailable,
// nil or an empty array (zrevrange, smembers) a miss. read_ids: each array
// element's leading integer (a follower id, or a post id before its ':').
StoreResult redis_result(const redisReply* reply, bool read_ids) {
  if (reply->type == REDIS_REPLY_ERROR) return {StoreStatus::kUnavailable, reply->str};
  if (reply->type == REDIS_REPLY_NIL || (reply->type == REDIS_REPLY_ARRAY && reply->elements == 0))
    return {StoreStatus::kMiss};
  StoreResult out{StoreStatus::kOk};
  if (read_ids && reply->type == REDIS_REPLY_ARRAY) {
    out.ids.reserve(reply->elements);
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* e = reply->element[i];
      if (e->type != REDIS_REPLY_STRING) continue;
      int64_t id = 0;
      const auto [end, ec] = std::from_chars(e->str, e->str + e->len, id);
      if (ec == std::errc()) out.ids.push_back(id);
    }
  }
  return out;
}

// A later command's reply (a zadd's trim) leaves the op's outcome as it is
// unless it is an error: the write happened, the trim did not.
void redis_step_result(const redisReply* reply, StoreResult& out) {
  if (reply->type == REDIS_REPLY_ERROR && out.status != StoreStatus::kUnavailable)
    out = {StoreStatus::kUnavailable, reply->str};
}

struct Argv {
  explicit Argv(const std::vector<std::string>& args) {
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
};

class HiredisConnection final : public BlockingStoreConnection {
 public:
  HiredisConnection(const StoreAddress& address, int64_t timeout_ns) {
    ctx_ = redisConnectWithTimeout(address.host.c_str(), address.port, to_timeval(timeout_ns));
    if (!ctx_ || ctx_->err) {
      error_ = ctx_ ? ctx_->errstr : "cannot allocate a redis context";
      return;
    }
    redisSetTimeout(ctx_, to_timeval(timeout_ns));  // every command's send and receive
  }
  ~HiredisConnection() override {
    if (ctx_) redisFree(ctx_);
  }

  StoreResult run(const StoreRequest& r) override { return send({&r, 1}).front(); }
  std::vector<StoreResult> run_pipelined(const std::vector<StoreRequest>& requests) override { return send(requests); }
  bool broken() const override { return !ctx_ || ctx_->err != 0; }

 private:
  // Every command appended to hiredis' output buffer first; the first
  // redisGetReply writes them all at once, then the replies are read in
  // order: one round trip, as DeathStarBench's pipeline of ZADDs.
  std::vector<StoreResult> send(std::span<const StoreRequest> requests) {
    std::vector<StoreResult> out(requests.size(), StoreResult{StoreStatus::kUnavailable, "not sent: appending failed"});
    if (broken()) {
      for (auto& r : out) r.error = error_.empty() ? "connection broken" : error_;
      return out;
    }
    struct Sent {
      size_t request;  // index into requests
      bool first;      // the op's own command (else a trim behind it)
    };
    std::vector<Sent> sent;  // every command appended, in order
    bool appending = true;
    for (size_t i = 0; i < requests.size() && appending; ++i) {
      const std::vector<std::string> commands[2] = {redis_command(requests[i]), redis_trim_command(requests[i])};
      if (commands[0].empty()) {
        out[i] = no_such_op(requests[i]);
        continue;
      }
      for (size_t c = 0; c < 2 && !commands[c].empty(); ++c) {
        Argv argv(commands[c]);
        if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.ptrs.size()), argv.ptrs.data(), argv.lens.data()) !=
            REDIS_OK) {
          appending = false;
          break;
        }
        sent.push_back({i, c == 0});
      }
    }
    for (size_t k = 0; k < sent.size(); ++k) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK || !raw) {
        error_ = ctx_->errstr;  // the connection is broken now: the rest of the replies are lost with it
        for (size_t j = k; j < sent.size(); ++j) out[sent[j].request] = {StoreStatus::kUnavailable, error_};
        break;
      }
      auto* reply = static_cast<redisReply*>(raw);
      StoreResult& r = out[sent[k].request];
      if (sent[k].first)
        r = redis_result(reply, requests[sent[k].request].read_ids);
      else
        redis_step_result(reply, r);
      freeReplyObject(reply);
    }
    return out;
  }

  redisContext* ctx_ = nullptr;
  std::string error_;
};

// hiredis' async API on our own loop: hiredis parses and buffers, we own the
// descriptor's registration (its ev hooks) and the time. One pipelined
// connection; replies come in order, so the oldest op's deadline is the next
// one due. hiredis 0.14 has no timeout of its own: at an op's deadline the
// context is freed, which fails every pending callback (a NULL reply) — the
// connection is out of step with its answers anyway — and the next op
// reconnects.
class HiredisAsyncClient final : public AsyncStoreClient {
 public:
  HiredisAsyncClient(const StoreAddress& address, LoopRegistration& reg) : address_(address), reg_(reg) {}
  ~HiredisAsyncClient() override { close("store client closed"); }

  void run(const StoreRequest& r, int64_t deadline_ns, StoreDone done) override {
    const std::vector<std::string> commands[2] = {redis_command(r), redis_trim_command(r)};
    if (commands[0].empty()) return done(no_such_op(r));
    if (!ctx_ && !connect(monotonic_ns())) return done(unavailable(connect_error_));
    auto* op = new Op{deadline_ns, r.read_ids, std::move(done), 0, std::nullopt};
    in_flight_.push_back(op);
    for (const auto& command : commands) {
      if (command.empty()) break;  // no trim
      Argv argv(command);
      if (redisAsyncCommandArgv(ctx_, &HiredisAsyncClient::on_reply, op, static_cast<int>(argv.ptrs.size()),
                                argv.ptrs.data(), argv.lens.data()) != REDIS_OK) {
        const std::string why = ctx_->errstr[0] ? ctx_->errstr : "redis connection is closing";
        if (op->replies_left == 0) {  // nothing queued: hiredis will never call back for it
          in_flight_.pop_back();
          std::unique_ptr<Op> owned(op);
          return owned->done(unavailable(why));
        }
        op->result = unavailable(why);  // the trim was not sent: the op fails when its write's reply comes
        break;
      }
      ++op->replies_left;
    }
    flush_ = true;  // hiredis asked for write interest; service() writes at the end of this iteration
  }

  void on_ready(size_t, uint32_t ready) override {
    if (!ctx_) return;
    // Read first: a refused connect reports an error; hiredis' read path notices it and frees the context.
    if (ready & (net::kReadable | net::kHangup)) redisAsyncHandleRead(ctx_);
    if (ctx_ && (ready & net::kWritable)) redisAsyncHandleWrite(ctx_);
  }

  int64_t service(int64_t now_ns) override {
    if (ctx_ && !in_flight_.empty() && in_flight_.front()->deadline_ns <= now_ns) {
      if (!connected_) backoff_.failed(now_ns, "connect timed out");
      free_context(connected_ ? "no answer within the store timeout" : "connect timed out");
    }
    // What this iteration's ops queued leaves now (a connection still connecting writes when writable).
    if (ctx_ && connected_ && flush_) redisAsyncHandleWrite(ctx_);
    flush_ = false;
    return in_flight_.empty() ? INT64_MAX : in_flight_.front()->deadline_ns;
  }

  void close(const std::string& why) override {
    if (ctx_) free_context(why);
  }

 private:
  struct Op {
    int64_t deadline_ns;
    bool read_ids;
    StoreDone done;
    int replies_left = 0;               // the op's commands queued in hiredis whose callback has not run
    std::optional<StoreResult> result;  // set by its first reply (or a failure); done() at its last
  };

  bool connect(int64_t now_ns) {
    if (!backoff_.may_connect(now_ns)) {
      connect_error_ = backoff_.backing_off();
      return false;
    }
    redisAsyncContext* ac = redisAsyncConnect(address_.host.c_str(), address_.port);  // non-blocking connect
    if (!ac || ac->err) {
      connect_error_ = ac ? ac->errstr : "cannot allocate a redis context";
      if (ac) redisAsyncFree(ac);  // no hooks, no callbacks yet
      backoff_.failed(now_ns, connect_error_);
      return false;
    }
    ac->data = this;
    ac->ev.data = this;
    ac->ev.addRead = [](void* p) { static_cast<HiredisAsyncClient*>(p)->interest(net::kReadable, true); };
    ac->ev.delRead = [](void* p) { static_cast<HiredisAsyncClient*>(p)->interest(net::kReadable, false); };
    ac->ev.addWrite = [](void* p) { static_cast<HiredisAsyncClient*>(p)->interest(net::kWritable, true); };
    ac->ev.delWrite = [](void* p) { static_cast<HiredisAsyncClient*>(p)->interest(net::kWritable, false); };
    // Called when hiredis frees the context (our free, a lost connection, a failed connect): before the fd closes.
    ac->ev.cleanup = [](void* p) {
      auto* self = static_cast<HiredisAsyncClient*>(p);
      self->reg_.detach();
      self->ctx_ = nullptr;
      self->connected_ = false;
      self->interest_ = 0;
    };
    redisAsyncSetConnectCallback(ac, [](const redisAsyncContext* c, int status) {
      auto* self = static_cast<HiredisAsyncClient*>(c->data);
      if (status == REDIS_OK) {
        self->connected_ = true;
        self->backoff_.connected();
      } else {
        self->backoff_.failed(monotonic_ns(), c->errstr);
      }
    });
    ctx_ = ac;
    interest_ = 0;
    reg_.attach(ac->c.fd, 0);
    return true;
  }

  void interest(uint32_t bit, bool on) {
    interest_ = on ? (interest_ | bit) : (interest_ & ~bit);
    reg_.want(interest_);
  }

  // Frees the context: every pending callback runs with a NULL reply and fails with `why`.
  void free_context(const std::string& why) {
    failing_why_ = why;
    redisAsyncFree(ctx_);  // ends in the cleanup hook: ctx_ = nullptr
    failing_why_.clear();
  }

  // Runs once per command an op queued (its write, then any trim), in order;
  // the op ends at its last one.
  static void on_reply(redisAsyncContext* c, void* reply, void* privdata) {
    auto* self = static_cast<HiredisAsyncClient*>(c->data);
    auto* op = static_cast<Op*>(privdata);
    if (reply && !op->result) {
      op->result = redis_result(static_cast<redisReply*>(reply), op->read_ids);
    } else if (reply) {
      redis_step_result(static_cast<redisReply*>(reply), *op->result);
    } else if (!op->result || op->result->status != StoreStatus::kUnavailable) {
      // The context is being freed: our timeout or close, a lost connection, a failed connect.
      op->result = unavailable(!self->failing_why_.empty() ? self->failing_why_
                               : c->err                    ? std::string(c->errstr)
                                                           : std::string("redis connection closed"));
    }
    if (--op->replies_left > 0) return;
    std::unique_ptr<Op> owned(op);
    // Replies come in order: this is the oldest (erased wherever it is, to be safe).
    for (auto it = self->in_flight_.begin(); it != self->in_flight_.end(); ++it)
      if (*it == op) {
        self->in_flight_.erase(it);
        break;
      }
    owned->done(*owned->result);
  }

  StoreAddress address_;
  LoopRegistration& reg_;
  redisAsyncContext* ctx_ = nullptr;
  bool connected_ = false;
  bool flush_ = false;
  uint32_t interest_ = 0;
  std::deque<Op*> in_flight_;  // owned by hiredis' callback list until their reply
  ReconnectBackoff backoff_{"redis"};
  std::string failing_why_;
  std::string connect_error_;  // why connect() returned false
};

}  // namespace

std::unique_ptr<BlockingStoreConnection> connect_redis_blocking(const StoreAddress& address, int64_t timeout_ns) {
  return std::make_unique<HiredisConnection>(address, timeout_ns);
}

std::unique_ptr<AsyncStoreClient> make_redis_async(const StoreAddress& address, LoopRegistration& reg) {
  return std::make_unique<HiredisAsyncClient>(address, reg);
}

}  // namespace tailscope::svc::stores
