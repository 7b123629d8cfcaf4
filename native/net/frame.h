// The RPC frame: what every hop of the microservice graph sends
// (docs/protocol.md is the byte-by-byte contract). One frame carries one
// request or one response; frames of many calls interleave on one connection
// and are matched by request id (multiplexing).
//
// The parser treats input as hostile: the length field is checked against
// max_frame_bytes before anything is buffered, every field is checked against
// the length, and a bad frame is an error the caller answers by closing the
// connection (there is no way to resynchronise a byte stream after one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tailscope::net {

inline constexpr uint16_t kFrameMagic = 0x5453;  // "TS"
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 48;  // including the 4-byte length
inline constexpr size_t kDefaultMaxFrameBytes = 1 << 20;

enum class FrameKind : uint8_t { kRequest = 0, kResponse = 1 };

// Response status. Requests carry kOk.
enum class RpcStatus : uint16_t {
  kOk = 0,
  kUnknownMethod = 1,
  kRejected = 2,     // the callee's bounded queue was full (overload)
  kTimeout = 3,      // a call (this one or one downstream) exceeded its timeout
  kUnavailable = 4,  // a downstream connection failed or could not be opened
  kInternal = 5,
  kBadRequest = 6,
};
std::string_view status_name(RpcStatus s);

inline constexpr uint8_t kFlagSampled = 0x01;

// W3C-style trace context: a 128-bit trace id, the caller's span id and the
// sampling decision, made once at the root and propagated.
struct TraceContext {
  uint64_t trace_id_high = 0;
  uint64_t trace_id_low = 0;
  uint64_t parent_span_id = 0;
  bool sampled = false;
};

struct Frame {
  FrameKind kind = FrameKind::kRequest;
  uint64_t request_id = 0;
  RpcStatus status = RpcStatus::kOk;
  TraceContext trace;
  std::string method;  // requests only (≤ 255 bytes)
  std::string payload;
};

// A parsed frame whose method and payload point into the buffer it was parsed
// from: the hot path of the RPC channel decodes without a heap allocation.
// Valid until that buffer changes.
struct FrameView {
  FrameKind kind = FrameKind::kRequest;
  uint64_t request_id = 0;
  RpcStatus status = RpcStatus::kOk;
  TraceContext trace;
  std::string_view method;
  std::string_view payload;
};

// Appends the encoded frame to `out`. Throws std::invalid_argument when the
// method is longer than 255 bytes or the frame would exceed max_frame_bytes.
void append_frame(const Frame& frame, std::string& out, size_t max_frame_bytes = kDefaultMaxFrameBytes);
// The same encoding from parts: no Frame (and no copy of method or payload)
// is built, and a reused `out` allocates nothing once it has grown.
void append_frame(const FrameView& frame, std::string& out, size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Incremental parser for one connection's byte stream.
class FrameParser {
 public:
  explicit FrameParser(size_t max_frame_bytes = kDefaultMaxFrameBytes) : max_frame_bytes_(max_frame_bytes) {}
  enum class Result { kFrame, kNeedMore, kError };
  // Appends received bytes. Never buffers more than one frame plus a read.
  void feed(const char* data, size_t n) { buffer_.append(data, n); }
  // Takes the next whole frame out of the buffer. After kError the parser
  // stays in error (error() says why); the connection must be closed.
  Result next(Frame& out);
  // The zero-copy form: `out` points into the parser's buffer and stays valid
  // until the next feed() or next() call.
  Result next(FrameView& out);
  const std::string& error() const { return error_; }
  size_t buffered_bytes() const { return buffer_.size() - head_; }

 private:
  Result fail(std::string why);
  size_t max_frame_bytes_;
  std::string buffer_;
  size_t head_ = 0;
  std::string error_;
};

// Stateless form for one buffer (the fuzz target and tests): parses the frame
// at the start of `bytes`. Returns kFrame with *consumed set, kNeedMore or kError.
FrameParser::Result parse_frame(std::string_view bytes, size_t max_frame_bytes, Frame& out, size_t* consumed,
                                std::string* error);
// The zero-copy form: `out` points into `bytes`. Same checks, same results.
FrameParser::Result parse_frame_view(std::string_view bytes, size_t max_frame_bytes, FrameView& out, size_t* consumed,
                                     std::string* error);

}  // namespace tailscope::net
