// libFuzzer target: the RPC frame parser must never crash, hang or buffer
// without bound, whatever the bytes and however they are split.
#include <cstddef>
#include <cstdint>

#include "net/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tailscope::net;
  // The first byte chooses how the input is split into reads.
  const size_t chunk = size ? (data[0] % 32) + 1 : 1;
  FrameParser parser(4096);
  Frame f;
  for (size_t off = 0; off < size; off += chunk) {
    const size_t n = off + chunk <= size ? chunk : size - off;
    parser.feed(reinterpret_cast<const char*>(data) + off, n);
    FrameParser::Result r;
    while ((r = parser.next(f)) == FrameParser::Result::kFrame) {
      // Re-encoding what was parsed must reproduce a parseable frame.
      std::string again;
      append_frame(f, again, 4096);
      Frame g;
      size_t used = 0;
      if (parse_frame(again, 4096, g, &used, nullptr) != FrameParser::Result::kFrame || used != again.size())
        __builtin_trap();
    }
    if (parser.buffered_bytes() > 4096 + 32) __builtin_trap();
    if (r == FrameParser::Result::kError) break;
  }
  return 0;
}
