// HdrHistogram's interchange formats, so that HistogramLogAnalyzer, the Java
// and C HdrHistogram and the PyPI `hdrhistogram` package read our histograms
// and we read theirs:
//
//  * the V2 encoding: a 40-byte big-endian header (cookie, payload length,
//    normalizing index offset, significant digits, lowest, highest,
//    integer-to-double ratio) followed by the counts as ZigZag LEB128 varints,
//    with runs of empty buckets written as one negative number;
//  * the V2 compressed encoding: cookie, length, then the V2 encoding deflated
//    with zlib; base64 of that is the "HISTFAA..." string of .hlog lines;
//  * the histogram log format v1.3 (.hlog): '#' header lines, a CSV legend,
//    then one line per interval "[Tag=t,]start,length,max,base64".
//
// Decoders treat input as hostile: every length is checked against the bytes
// actually present and against the layout the header declares, so garbage
// costs a bounded amount of memory and time and ends in an HlogError.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/hdr_histogram.h"

namespace tailscope {

class HlogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Cookies as Java HdrHistogram writes them: the V2 base cookies
// (0x1c849303 encoding, 0x1c849304 compressed) with the word-size nibble
// 0x10 set. Decoders accept any word-size nibble, as Java does.
inline constexpr uint32_t kV2EncodingCookie = 0x1c849303u | 0x10u;
inline constexpr uint32_t kV2CompressedEncodingCookie = 0x1c849304u | 0x10u;
inline constexpr size_t kV2HeaderBytes = 40;

std::vector<uint8_t> encode_v2(const HdrHistogram& histogram);
std::vector<uint8_t> encode_v2_compressed(const HdrHistogram& histogram);
std::string encode_compressed_base64(const HdrHistogram& histogram);

HdrHistogram decode_v2(std::span<const uint8_t> bytes);
HdrHistogram decode_v2_compressed(std::span<const uint8_t> bytes);
HdrHistogram decode_compressed_base64(std::string_view base64);

// Writes a v1.3 histogram log. Timestamps in interval lines are seconds
// relative to the header's StartTime (we also write it as BaseTime, so
// readers need not guess whether they are absolute).
class HlogWriter {
 public:
  explicit HlogWriter(std::ostream& out);

  // "#[<comment>]" (if any), the version line, StartTime, BaseTime, legend.
  void write_header(double start_time_s_epoch, std::string_view comment);

  // "[Tag=<tag>,]<start>,<duration>,<max/max_value_unit_ratio>,<base64>", all
  // numbers with 3 decimals. Throws std::invalid_argument for a tag with a
  // comma, whitespace or control character, or negative/non-finite times.
  void write_interval(double start_s, double duration_s, const HdrHistogram& histogram, std::string_view tag = {},
                      double max_value_unit_ratio = 1e6);

 private:
  void flush_or_throw();
  std::ostream& out_;
};

struct HlogInterval {
  std::string tag;  // empty when the line has no Tag=
  double start_s;   // as written in the log (relative to BaseTime if any)
  double duration_s;
  double max_value;  // Interval_Max as written (in max_value_unit_ratio units)
  HdrHistogram histogram;
};

// Reads every interval of a histogram log (v1.x). Throws HlogError naming the
// line number on a malformed line or undecodable histogram.
std::vector<HlogInterval> read_hlog(std::istream& in);

}  // namespace tailscope
