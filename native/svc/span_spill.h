// The span spiller's file during a run: each span as one fixed-size binary
// record, each name (service, operation, launch, tags) written once, the
// first time a span refers to it. The spiller thread's work per span is then
// about a copy, where formatting its NDJSON line cost ~2 300 instructions —
// on a saturated machine every one of them is throughput the traced service
// loses (issue 30, tracing cost ≤ 2 %). SpanSpiller::finish() converts the
// spill to the NDJSON file (append_span_line, byte for byte what the spiller
// used to write) when the service stops.
//
// Layout (native byte order: a spill is read back by the same build, on the
// same machine):
//   header   "TSSPILL1", u32 record bytes, u32 stem bytes, the stem
//   blocks   one per spill: u64 payload bytes, i64 the tracer's Unix offset
//            (Tracer::to_unix_ns at that spill), then entries:
//              'N' u64 ref, u32 bytes, the name   (a name's first use)
//              'S' SpillRecord                    (a span)
// A name's ref is its address in the recording process (the names live as
// long as the process: topology strings and literals), so a record is the
// SpanRecord's fields copied as they are.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "svc/tracer.h"

namespace tailscope {
class AtomicFileWriter;
}

namespace tailscope::svc {

// Writes spans into spill blocks. Not thread-safe: the spiller thread's alone
// (it remembers which names it has written).
class SpillEncoder {
 public:
  // The file's first bytes: `stem` names the NDJSON file a conversion writes.
  static void append_header(std::string* out, std::string_view stem);
  void begin_block(std::string* out, int64_t unix_offset_ns);
  void append(std::string* out, const SpanRecord& s);
  // Closes the block; a block without a span is taken back out.
  void end_block(std::string* out);

 private:
  void define_name(std::string* out, const void* address, std::string_view name);
  // Open addressing on the names' addresses: a handful of instructions per
  // lookup, and a run has a few dozen names.
  bool known(uint64_t ref) const noexcept;
  void remember(uint64_t ref);
  static size_t slot(uint64_t ref, size_t mask) noexcept {
    return static_cast<size_t>((ref * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
  }

  std::vector<uint64_t> seen_ = std::vector<uint64_t>(64, 0);
  size_t seen_count_ = 0;
  size_t block_start_ = 0;
  bool block_has_span_ = false;
};

struct SpillConversion {
  std::string stem;
  int64_t spans = 0;
  // Bytes after the last whole block: a spill cut short (the service killed
  // mid-write); its spans are lost, every earlier block is converted.
  int64_t truncated_bytes = 0;
};

// Appends the NDJSON line of every span in the spill at `spill_path` to
// `out`, one block at a time (memory: one spill period's spans). Throws
// std::runtime_error naming the file if it is not a span spill of this build.
SpillConversion convert_span_spill(const std::string& spill_path, AtomicFileWriter* out);

// `tailscope-svc --decode-spill FILE`: the spill a killed service left
// (`.NAME.spans.spill.tmp.XXXXXX`) → `NAME.spans.jsonl` beside it (or, if a
// process of that name — the restarted service — wrote that file,
// `NAME.XXXXXX.spans.jsonl`), written atomically. Returns {spans,
// truncated_bytes, path}.
nlohmann::json decode_span_spill_file(const std::string& spill_path);
// A file name a killed service's spill has (merge_span_files converts them).
bool is_left_spill(std::string_view file_name);

}  // namespace tailscope::svc
