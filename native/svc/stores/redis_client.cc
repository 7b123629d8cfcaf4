#include "svc/stores/redis_client.h"

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

namespace tailscope::svc::stores {
namespace {

timeval to_timeval(int64_t ns) { return timeval{static_cast<time_t>(ns / 1'000'000'000), (ns % 1'000'000'000) / 1000}; }

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

  StoreResult run(const StoreRequest& r) override {
    if (broken()) return {StoreStatus::kUnavailable, error_.empty() ? "connection broken" : error_};
    const std::string member = std::to_string(r.member);
    std::vector<std::string> args;
    switch (r.op) {
      case StoreVerb::kGet:
        args = {"GET", r.key};
        break;
      case StoreVerb::kSet:
        args = {"SET", r.key, store_payload(r.value_bytes)};
        break;
      case StoreVerb::kZadd:
        // The score orders a timeline by recency; the member is the post (or follower) id.
        args = {"ZADD", r.key, member, member + ":" + store_payload(r.value_bytes)};
        break;
      case StoreVerb::kZrevrange:
        args = {"ZREVRANGE", r.key, "0", std::to_string(r.limit - 1)};
        break;
      case StoreVerb::kSadd:
        args = {"SADD", r.key, member};
        break;
      case StoreVerb::kSmembers:
        args = {"SMEMBERS", r.key};
        break;
      default:
        return {StoreStatus::kUnavailable, std::string("redis has no op ") + store_verb_name(r.op)};
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply =
        static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!reply) {
      error_ = ctx_->errstr;
      return {StoreStatus::kUnavailable, error_};
    }
    StoreResult out{StoreStatus::kOk, {}};
    if (reply->type == REDIS_REPLY_ERROR) {
      out = {StoreStatus::kUnavailable, reply->str};
    } else if (reply->type == REDIS_REPLY_NIL || (reply->type == REDIS_REPLY_ARRAY && reply->elements == 0)) {
      out.status = StoreStatus::kMiss;
    }
    freeReplyObject(reply);
    return out;
  }
  bool broken() const override { return !ctx_ || ctx_->err != 0; }

 private:
  redisContext* ctx_ = nullptr;
  std::string error_;
};

}  // namespace

std::unique_ptr<BlockingStoreConnection> connect_redis_blocking(const StoreAddress& address, int64_t timeout_ns) {
  return std::make_unique<HiredisConnection>(address, timeout_ns);
}

}  // namespace tailscope::svc::stores
