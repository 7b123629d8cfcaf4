#include "load/rpc_protocol.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "net/frame.h"

namespace tailscope::load {
namespace {

using net::Frame;
using net::FrameKind;
using net::FrameParser;
using net::RpcStatus;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class RpcClient final : public ClientProtocol {
 public:
  RpcClient(const LoadConfig& config, uint32_t connection_id)
      : connection_id_(connection_id),
        sampled_(config.rpc_sampled),
        trace_rng_(config.seed * 0x100000001B3ull ^ connection_id) {
    if (config.rpc_method.empty())
      throw std::invalid_argument("--protocol rpc needs --rpc-method NAME (an endpoint of the service)");
    if (config.rpc_method.size() > 255)
      throw std::invalid_argument("--rpc-method: '" + config.rpc_method + "' is longer than 255 bytes");
    const size_t frame_bytes = net::kFrameHeaderBytes + config.rpc_method.size() + config.payload_bytes;
    if (frame_bytes > net::kDefaultMaxFrameBytes)
      throw std::invalid_argument("--payload-bytes " + std::to_string(config.payload_bytes) + ": the request frame (" +
                                  std::to_string(frame_bytes) + " bytes) exceeds the maximum frame size " +
                                  std::to_string(net::kDefaultMaxFrameBytes));
    request_.kind = FrameKind::kRequest;
    request_.method = config.rpc_method;
    request_.payload.resize(config.payload_bytes);
  }

  void append_request(uint64_t seq, std::string& out) override {
    // The sequence number is unique on this connection, also across
    // reconnects: an id in flight is never reused.
    request_.request_id = seq;
    fill_echo_payload(connection_id_, seq, request_.payload.data(), request_.payload.size());
    if (sampled_) {  // a root of its own trace, as the HTTP front would start one
      request_.trace.trace_id_high = splitmix64(trace_rng_);
      request_.trace.trace_id_low = splitmix64(trace_rng_) | 1;  // never the all-zero (invalid) id
      request_.trace.sampled = true;
    }
    net::append_frame(request_, out);
    in_flight_ids_.push_back(seq);
  }

  void reset_state() override {
    in_flight_ids_.clear();
    partial_.clear();
  }

  std::string violation() const override { return violation_; }

 protected:
  // Takes bytes up to the end of the current frame only, so one call yields
  // at most one response and the rest stays in `data` for the next call.
  int feed_one(std::string_view data, size_t* used) override {
    Frame& frame = response_;
    size_t consumed = 0;
    std::string why;
    if (partial_.empty()) {  // common case: a whole frame in the received bytes, parsed in place
      switch (net::parse_frame(data, net::kDefaultMaxFrameBytes, frame, &consumed, &why)) {
        case FrameParser::Result::kError:
          return fail("malformed response frame: " + why);
        case FrameParser::Result::kNeedMore:
          // parse_frame has checked the length field (when present), so this
          // is less than one frame of at most the maximum frame size.
          partial_.assign(data);
          *used = data.size();
          return 0;
        case FrameParser::Result::kFrame:
          *used = consumed;
          return answer(frame);
      }
    }
    // Top up the partial frame: to the end of the header, or of the frame
    // once the (already validated) length field is known.
    size_t want = net::kFrameHeaderBytes;
    if (partial_.size() >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(partial_.data());
      want = 4 + ((size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3]);
    }
    const size_t take = std::min(data.size(), want - partial_.size());
    partial_.append(data.data(), take);
    *used = take;
    switch (net::parse_frame(partial_, net::kDefaultMaxFrameBytes, frame, &consumed, &why)) {
      case FrameParser::Result::kError:
        return fail("malformed response frame: " + why);
      case FrameParser::Result::kNeedMore:
        return 0;
      case FrameParser::Result::kFrame:
        partial_.clear();
        return answer(frame);
    }
    return fail("unreachable parser state");
  }

 private:
  int answer(const Frame& frame) {
    if (frame.kind != FrameKind::kResponse)
      return fail("server sent a request frame (id " + std::to_string(frame.request_id) + ")");
    const auto it = std::find(in_flight_ids_.begin(), in_flight_ids_.end(), frame.request_id);
    if (it == in_flight_ids_.end())
      return fail("response to request id " + std::to_string(frame.request_id) + ", which is not in flight");
    answered_position_ = static_cast<size_t>(it - in_flight_ids_.begin());
    in_flight_ids_.erase(it);
    return frame.status == RpcStatus::kOk ? 1 : 2;
  }
  int fail(std::string why) {
    violation_ = "rpc: " + std::move(why);
    partial_.clear();
    return -1;
  }

  uint32_t connection_id_;
  bool sampled_;
  uint64_t trace_rng_;
  Frame request_;                       // reused: only id, payload bytes and trace ids change per send
  Frame response_;                      // reused: keeps its strings' capacity
  std::deque<uint64_t> in_flight_ids_;  // send order, parallel to the worker's in-flight requests
  std::string partial_;                 // an incomplete frame, at most one
  std::string violation_;
};

}  // namespace

std::unique_ptr<ClientProtocol> make_rpc_client(const LoadConfig& config, uint32_t connection_id) {
  return std::make_unique<RpcClient>(config, connection_id);
}

}  // namespace tailscope::load
