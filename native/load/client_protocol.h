// The request/response side of a load protocol, per connection: what to
// send, and how to tell a whole, correct response from a wrong one.
// Pluggable: echo (RFC 862, byte-for-byte check), http (status check) and
// rpc (tailscope RPC frames, rpc_protocol.h: status check, matched by id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "load/config.h"
#include "net/http.h"

namespace tailscope::load {

class ClientProtocol {
 public:
  enum class Verdict { kOk, kBadStatus };
  virtual ~ClientProtocol() = default;
  // Appends request `seq` of this connection to out.
  virtual void append_request(uint64_t seq, std::string& out) = 0;
  // Consumes received bytes; calls on_response(verdict, position, bytes)
  // once per complete response (or (verdict, position) or (verdict), if
  // that is all F takes); `bytes` is that whole response's length, however
  // many feeds it arrived in.
  // `position` says which request in flight it answers, counted in send
  // order from the oldest (0): echo and http answer in order, so always 0;
  // rpc responses come in any order and are matched by request id. Returns
  // false on a protocol violation (echo mismatch, malformed HTTP, malformed
  // frame, unknown request id): the connection cannot be trusted any more.
  template <class F>
  bool feed(std::string_view data, F&& on_response) {
    while (!data.empty()) {
      size_t used = 0;
      int r = feed_one(data, &used);
      data.remove_prefix(used);
      response_bytes_ += used;
      if (r < 0) return false;
      if (r > 0) {
        const Verdict verdict = r == 1 ? Verdict::kOk : Verdict::kBadStatus;
        const size_t bytes = response_bytes_;
        response_bytes_ = 0;
        if constexpr (std::is_invocable_v<F&, Verdict, size_t, size_t>)
          on_response(verdict, answered_position_, bytes);
        else if constexpr (std::is_invocable_v<F&, Verdict, size_t>)
          on_response(verdict, answered_position_);
        else
          on_response(verdict);
      } else if (used == 0) {
        break;
      }
    }
    return true;
  }
  // Some bytes of a response were read but not the whole response: a close
  // now loses a response the server had begun, which no retry may hide.
  bool mid_response() const { return response_bytes_ > 0; }
  // The last whole response said the server closes the connection after it.
  virtual bool closes_after_response() const { return false; }
  // Requests may be sent again on a new connection when a reused one was
  // closed before any byte of their response (http GET: idempotent, RFC 9110
  // §9.2.2); echo and rpc requests are not retried.
  virtual bool resendable() const { return false; }
  // Forget partial state (after a reconnect).
  void reset() {
    response_bytes_ = 0;
    reset_state();
  }
  // Why the last feed failed.
  virtual std::string violation() const = 0;

 protected:
  // -1 violation, 0 need more (all of data used), 1 ok response, 2 bad status.
  // A protocol whose responses can come out of order sets answered_position_
  // before returning 1 or 2.
  virtual int feed_one(std::string_view data, size_t* used) = 0;
  virtual void reset_state() = 0;
  size_t answered_position_ = 0;

 private:
  size_t response_bytes_ = 0;  // of the response being read
};

// "echo", "http", "rpc"; throws std::invalid_argument naming the text.
LoadProtocol parse_load_protocol(std::string_view text);
std::string_view to_string(LoadProtocol protocol);

// Deterministic payload for request `seq` of connection `connection_id`:
// different per request, so a server that returns another connection's or a
// stale request's bytes fails the check.
void fill_echo_payload(uint32_t connection_id, uint64_t seq, char* out, size_t n);

std::unique_ptr<ClientProtocol> make_client_protocol(const LoadConfig& config, uint32_t connection_id);

}  // namespace tailscope::load
