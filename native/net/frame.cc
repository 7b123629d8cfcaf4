#include "net/frame.h"

#include <cstring>
#include <stdexcept>

namespace tailscope::net {
namespace {

// Big-endian stores into a buffer already sized for the frame.
void put_be(char* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v);
}
uint64_t get_be(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// The owning form of a parsed view (Frame's strings keep their capacity when reused).
void copy_frame(const FrameView& v, Frame& out) {
  out.kind = v.kind;
  out.request_id = v.request_id;
  out.status = v.status;
  out.trace = v.trace;
  out.method.assign(v.method);
  out.payload.assign(v.payload);
}

}  // namespace

std::string_view status_name(RpcStatus s) {
  switch (s) {
    case RpcStatus::kOk:
      return "ok";
    case RpcStatus::kUnknownMethod:
      return "unknown_method";
    case RpcStatus::kRejected:
      return "rejected";
    case RpcStatus::kTimeout:
      return "timeout";
    case RpcStatus::kUnavailable:
      return "unavailable";
    case RpcStatus::kInternal:
      return "internal";
    case RpcStatus::kBadRequest:
      return "bad_request";
  }
  return "unknown_status";
}

void append_frame(const Frame& f, std::string& out, size_t max_frame_bytes) {
  append_frame(FrameView{f.kind, f.request_id, f.status, f.trace, f.method, f.payload}, out, max_frame_bytes);
}

void append_frame(const FrameView& f, std::string& out, size_t max_frame_bytes) {
  if (f.method.size() > 255) throw std::invalid_argument("rpc frame: method name longer than 255 bytes");
  const size_t total = kFrameHeaderBytes + f.method.size() + f.payload.size();
  if (total > max_frame_bytes)
    throw std::invalid_argument("rpc frame: " + std::to_string(total) + " bytes exceeds the maximum frame size " +
                                std::to_string(max_frame_bytes));
  const size_t at = out.size();
  out.resize(at + total);  // within capacity once a reused buffer has grown: no allocation
  char* p = out.data() + at;
  put_be(p, total - 4, 4);
  put_be(p + 4, kFrameMagic, 2);
  p[6] = static_cast<char>(kFrameVersion);
  p[7] = static_cast<char>(f.kind);
  put_be(p + 8, f.request_id, 8);
  put_be(p + 16, static_cast<uint16_t>(f.status), 2);
  p[18] = static_cast<char>(f.trace.sampled ? kFlagSampled : 0);
  p[19] = static_cast<char>(f.method.size());
  put_be(p + 20, f.trace.trace_id_high, 8);
  put_be(p + 28, f.trace.trace_id_low, 8);
  put_be(p + 36, f.trace.parent_span_id, 8);
  put_be(p + 44, f.payload.size(), 4);
  if (!f.method.empty()) std::memcpy(p + kFrameHeaderBytes, f.method.data(), f.method.size());
  if (!f.payload.empty()) std::memcpy(p + kFrameHeaderBytes + f.method.size(), f.payload.data(), f.payload.size());
}

FrameParser::Result parse_frame(std::string_view bytes, size_t max_frame_bytes, Frame& out, size_t* consumed,
                                std::string* error) {
  FrameView v;
  const FrameParser::Result r = parse_frame_view(bytes, max_frame_bytes, v, consumed, error);
  if (r != FrameParser::Result::kFrame) return r;
  copy_frame(v, out);
  return r;
}

FrameParser::Result parse_frame_view(std::string_view bytes, size_t max_frame_bytes, FrameView& out, size_t* consumed,
                                     std::string* error) {
  using R = FrameParser::Result;
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return R::kError;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() >= 4) {
    const uint64_t length = get_be(p, 4);
    // Decided from the length field alone, before buffering the body.
    if (length + 4 > max_frame_bytes)
      return fail("frame of " + std::to_string(length + 4) + " bytes exceeds the maximum " +
                  std::to_string(max_frame_bytes));
    if (length + 4 < kFrameHeaderBytes)
      return fail("frame length " + std::to_string(length) + " shorter than the header");
  }
  if (bytes.size() >= 8) {
    if (get_be(p + 4, 2) != kFrameMagic) return fail("bad magic (not a tailscope RPC frame)");
    if (p[6] != kFrameVersion) return fail("unsupported frame version " + std::to_string(p[6]));
    if (p[7] > 1) return fail("bad frame kind " + std::to_string(p[7]));
  }
  if (bytes.size() < kFrameHeaderBytes) return R::kNeedMore;
  const uint64_t length = get_be(p, 4);
  const auto kind = static_cast<FrameKind>(p[7]);
  const uint64_t status = get_be(p + 16, 2);
  const uint8_t flags = p[18];
  const uint8_t method_len = p[19];
  const uint64_t payload_len = get_be(p + 44, 4);
  if (flags & ~kFlagSampled) return fail("unknown flag bits set");
  if (status > static_cast<uint64_t>(RpcStatus::kBadRequest)) return fail("unknown status " + std::to_string(status));
  if (kind == FrameKind::kRequest && (status != 0 || method_len == 0))
    return fail("request frame needs status 0 and a method");
  if (kind == FrameKind::kResponse && method_len != 0) return fail("response frame carries a method");
  if (length + 4 != kFrameHeaderBytes + method_len + payload_len)
    return fail("frame length " + std::to_string(length) + " disagrees with method and payload lengths");
  if (bytes.size() < length + 4) return R::kNeedMore;
  out.kind = kind;
  out.request_id = get_be(p + 8, 8);
  out.status = static_cast<RpcStatus>(status);
  out.trace.sampled = flags & kFlagSampled;
  out.trace.trace_id_high = get_be(p + 20, 8);
  out.trace.trace_id_low = get_be(p + 28, 8);
  out.trace.parent_span_id = get_be(p + 36, 8);
  out.method = bytes.substr(kFrameHeaderBytes, method_len);
  out.payload = bytes.substr(kFrameHeaderBytes + method_len, payload_len);
  *consumed = length + 4;
  return R::kFrame;
}

FrameParser::Result FrameParser::fail(std::string why) {
  error_ = std::move(why);
  buffer_.clear();
  head_ = 0;
  return Result::kError;
}

FrameParser::Result FrameParser::next(Frame& out) {
  FrameView v;
  const Result r = next(v);
  if (r != Result::kFrame) return r;
  copy_frame(v, out);
  return r;
}

FrameParser::Result FrameParser::next(FrameView& out) {
  if (!error_.empty()) return Result::kError;
  if (head_ > 0 && head_ == buffer_.size()) {  // everything taken: start over, keeping the capacity
    buffer_.clear();
    head_ = 0;
  }
  size_t consumed = 0;
  std::string why;
  const Result r = parse_frame_view(std::string_view(buffer_).substr(head_), max_frame_bytes_, out, &consumed, &why);
  if (r == Result::kError) return fail(std::move(why));
  if (r == Result::kNeedMore) {
    if (head_ > 0) {  // compact so the buffer holds at most one partial frame
      buffer_.erase(0, head_);
      head_ = 0;
    }
    return r;
  }
  // The view points into buffer_: it is cleared on the next call, not now.
  head_ += consumed;
  return r;
}

}  // namespace tailscope::net
