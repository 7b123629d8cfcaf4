#include "core/hlog.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>

namespace tailscope {
namespace {

constexpr uint32_t kCookieWordSizeMask = 0xf0u;
constexpr uint32_t kV2EncodingCookieBase = 0x1c849303u;
constexpr uint32_t kV2CompressedCookieBase = 0x1c849304u;
// V0/V1 cookies, recognised only to give a precise error.
constexpr uint32_t kV0EncodingCookieBase = 0x1c849308u;
constexpr uint32_t kV1EncodingCookieBase = 0x1c849301u;
constexpr uint32_t kV1CompressedCookieBase = 0x1c849302u;
constexpr size_t kCompressedHeaderBytes = 8;  // cookie + length
constexpr size_t kMaxVarintBytes = 9;         // LEB128-64b9B

uint32_t cookie_base(uint32_t cookie) { return cookie & ~kCookieWordSizeMask; }

// ---- big-endian fields -----------------------------------------------------

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}
uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
uint64_t get_u64(const uint8_t* p) { return (uint64_t{get_u32(p)} << 32) | uint64_t{get_u32(p + 4)}; }

// ---- ZigZag LEB128 (HdrHistogram's "LEB128-64b9B"): 7 bits per byte for the
// first 8 bytes, all 8 bits of a 9th, so any int64 fits in 9 bytes. -----------

void put_zigzag(std::vector<uint8_t>& out, int64_t value) {
  uint64_t v = (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
  for (int i = 0; i < 8; ++i) {
    if ((v >> 7) == 0) {
      out.push_back(static_cast<uint8_t>(v));
      return;
    }
    out.push_back(static_cast<uint8_t>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

// Reads one varint at pos; false if the payload ends inside it.
bool get_zigzag(std::span<const uint8_t> in, size_t& pos, int64_t& value) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    if (pos >= in.size()) return false;
    const uint8_t b = in[pos++];
    v |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) {
      value = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
      return true;
    }
  }
  if (pos >= in.size()) return false;
  v |= uint64_t{in[pos++]} << 56;
  value = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  return true;
}

// ---- base64 (RFC 4648, standard alphabet, padded) ---------------------------

constexpr char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::span<const uint8_t> in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t n = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += kBase64Alphabet[(n >> 6) & 63];
    out += kBase64Alphabet[n & 63];
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t{in[i]} << 16;
    if (rest == 2) n |= uint32_t{in[i + 1]} << 8;
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

constexpr std::array<int8_t, 256> make_base64_table() {
  std::array<int8_t, 256> table{};
  for (auto& t : table) t = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kBase64Alphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kBase64Table = make_base64_table();

std::vector<uint8_t> base64_decode(std::string_view in) {
  while (!in.empty() && std::isspace(static_cast<unsigned char>(in.back()))) in.remove_suffix(1);
  while (!in.empty() && std::isspace(static_cast<unsigned char>(in.front()))) in.remove_prefix(1);
  if (in.empty()) throw HlogError("base64: empty histogram string");
  if (in.size() % 4 != 0) {
    throw HlogError("base64: length " + std::to_string(in.size()) + " is not a multiple of 4");
  }
  size_t padding = 0;
  if (in.back() == '=') ++padding;
  if (in.size() >= 2 && in[in.size() - 2] == '=') ++padding;
  std::vector<uint8_t> out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t n = 0;
    const bool last_quad = i + 4 == in.size();
    for (size_t j = 0; j < 4; ++j) {
      const unsigned char c = static_cast<unsigned char>(in[i + j]);
      int8_t d = kBase64Table[c];
      if (c == '=' && last_quad && j >= 4 - padding) d = 0;
      if (d < 0) {
        throw HlogError("base64: invalid character at offset " + std::to_string(i + j));
      }
      n = (n << 6) | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<uint8_t>(n >> 16));
    if (!(last_quad && padding == 2)) out.push_back(static_cast<uint8_t>(n >> 8));
    if (!(last_quad && padding >= 1)) out.push_back(static_cast<uint8_t>(n));
  }
  return out;
}

// ---- zlib -------------------------------------------------------------------

struct Inflater {
  z_stream stream{};
  Inflater(const uint8_t* data, size_t size) {
    if (inflateInit(&stream) != Z_OK) throw HlogError("zlib: inflateInit failed");
    stream.next_in = const_cast<Bytef*>(data);
    stream.avail_in = static_cast<uInt>(size);
  }
  ~Inflater() { inflateEnd(&stream); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Fills exactly `size` bytes at out; throws if the stream ends or is corrupt first.
  void read_exactly(uint8_t* out, size_t size, const char* what) {
    stream.next_out = out;
    stream.avail_out = static_cast<uInt>(size);
    while (stream.avail_out > 0) {
      const int rc = inflate(&stream, Z_NO_FLUSH);
      if (rc == Z_STREAM_END && stream.avail_out > 0) {
        throw HlogError(std::string("V2 compressed histogram: deflate stream ends inside the ") + what);
      }
      if (rc == Z_BUF_ERROR) {
        throw HlogError(std::string("V2 compressed histogram: deflate stream is truncated in the ") + what);
      }
      if (rc != Z_OK && rc != Z_STREAM_END) {
        throw HlogError(std::string("V2 compressed histogram: corrupt deflate data in the ") + what +
                        (stream.msg ? std::string(" (") + stream.msg + ")" : ""));
      }
    }
  }

  // The stream must end here: no more output, checksum verified.
  void expect_end() {
    uint8_t extra = 0;
    stream.next_out = &extra;
    stream.avail_out = 1;
    const int rc = inflate(&stream, Z_FINISH);
    if (rc == Z_STREAM_END && stream.avail_out == 1) {
      if (stream.avail_in != 0) {
        throw HlogError("V2 compressed histogram: trailing bytes after the deflate stream");
      }
      return;
    }
    if (stream.avail_out == 0) {
      throw HlogError("V2 compressed histogram: inflated data is longer than the payload length in its header");
    }
    throw HlogError("V2 compressed histogram: deflate stream is truncated or corrupt");
  }
};

// ---- V2 header -------------------------------------------------------------

struct V2Header {
  uint32_t cookie;
  int32_t payload_bytes;
  int32_t normalizing_index_offset;
  int32_t significant_figures;
  int64_t lowest;
  int64_t highest;
  double integer_to_double_ratio;
};

V2Header parse_v2_header(const uint8_t* p) {
  V2Header h;
  h.cookie = get_u32(p);
  h.payload_bytes = static_cast<int32_t>(get_u32(p + 4));
  h.normalizing_index_offset = static_cast<int32_t>(get_u32(p + 8));
  h.significant_figures = static_cast<int32_t>(get_u32(p + 12));
  h.lowest = static_cast<int64_t>(get_u64(p + 16));
  h.highest = static_cast<int64_t>(get_u64(p + 24));
  h.integer_to_double_ratio = std::bit_cast<double>(get_u64(p + 32));
  return h;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Validates the header and builds the (empty) histogram it describes.
HdrHistogram histogram_for_header(const V2Header& h) {
  const uint32_t base = cookie_base(h.cookie);
  if (base != kV2EncodingCookieBase) {
    if (base == kV0EncodingCookieBase || base == kV1EncodingCookieBase) {
      throw HlogError("V2 histogram: cookie " + hex(h.cookie) + " is a V0/V1 encoding, which is not supported");
    }
    throw HlogError("V2 histogram: bad cookie " + hex(h.cookie) + " (expected " + hex(kV2EncodingCookie) + ")");
  }
  if (h.payload_bytes < 0) {
    throw HlogError("V2 histogram: negative payload length " + std::to_string(h.payload_bytes));
  }
  if (h.normalizing_index_offset != 0) {
    throw HlogError("V2 histogram: normalizing index offset " + std::to_string(h.normalizing_index_offset) +
                    " is not supported (only non-shifted histograms)");
  }
  if (h.significant_figures < 0 || h.significant_figures > 5 || h.lowest < 1 || h.highest / 2 < h.lowest) {
    throw HlogError("V2 histogram: invalid layout (significant figures " + std::to_string(h.significant_figures) +
                    ", lowest " + std::to_string(h.lowest) + ", highest " + std::to_string(h.highest) + ")");
  }
  // The largest valid layout (5 digits, 1 .. 2^63) has ~6.2 M counts (50 MB),
  // so this allocation is bounded whatever the header says.
  try {
    return HdrHistogram(h.lowest, h.highest, h.significant_figures);
  } catch (const std::invalid_argument& e) {
    throw HlogError(std::string("V2 histogram: invalid layout: ") + e.what());
  }
}

void check_payload_length(const V2Header& h, const HdrHistogram& histogram) {
  const uint64_t max_payload = uint64_t{histogram.counts_array_length()} * kMaxVarintBytes;
  if (static_cast<uint64_t>(h.payload_bytes) > max_payload) {
    throw HlogError("V2 histogram: payload length " + std::to_string(h.payload_bytes) + " exceeds the " +
                    std::to_string(max_payload) + " bytes its layout can need");
  }
}

void decode_counts(std::span<const uint8_t> payload, HdrHistogram& histogram) {
  const size_t counts_length = histogram.counts_array_length();
  size_t index = 0;
  size_t pos = 0;
  while (pos < payload.size()) {
    int64_t count;
    if (!get_zigzag(payload, pos, count)) {
      throw HlogError("V2 histogram: payload ends inside a varint at byte " + std::to_string(pos));
    }
    if (count < 0) {
      // A run of -count empty buckets.
      if (count < -static_cast<int64_t>(counts_length - index)) {
        throw HlogError("V2 histogram: zero run at counts index " + std::to_string(index) + " goes past the " +
                        std::to_string(counts_length) + " counts");
      }
      index += static_cast<size_t>(-count);
      continue;
    }
    if (index >= counts_length) {
      throw HlogError("V2 histogram: more counts than the " + std::to_string(counts_length) + " its layout has");
    }
    if (!histogram.add_at_index(index, count)) {
      throw HlogError("V2 histogram: total count overflows at counts index " + std::to_string(index));
    }
    ++index;
  }
}

std::string format_3_decimals(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

// ---- encoding ---------------------------------------------------------------

std::vector<uint8_t> encode_v2(const HdrHistogram& histogram) {
  std::vector<uint8_t> out;
  out.reserve(kV2HeaderBytes + 256);
  put_u32(out, kV2EncodingCookie);
  put_u32(out, 0);  // payload length, patched below
  put_u32(out, 0);  // normalizing index offset: we never shift
  put_u32(out, static_cast<uint32_t>(histogram.significant_figures()));
  put_u64(out, static_cast<uint64_t>(histogram.lowest_discernible_value()));
  put_u64(out, static_cast<uint64_t>(histogram.highest_trackable_value()));
  put_u64(out, std::bit_cast<uint64_t>(1.0));  // integer-to-double conversion ratio

  // Counts up to the last non-empty bucket; empty runs become one negative number
  // (a single empty bucket is written as 0, as HdrHistogram does).
  size_t limit = histogram.counts_array_length();
  while (limit > 0 && histogram.count_at_index(limit - 1) == 0) --limit;
  size_t i = 0;
  while (i < limit) {
    const int64_t count = histogram.count_at_index(i++);
    if (count != 0) {
      put_zigzag(out, count);
      continue;
    }
    int64_t zeros = 1;
    while (i < limit && histogram.count_at_index(i) == 0) {
      ++zeros;
      ++i;
    }
    put_zigzag(out, zeros > 1 ? -zeros : 0);
  }
  const size_t payload_bytes = out.size() - kV2HeaderBytes;
  if (payload_bytes > static_cast<size_t>(INT32_MAX)) {
    throw HlogError("V2 histogram: payload too large to encode");
  }
  const uint32_t len = static_cast<uint32_t>(payload_bytes);
  for (int b = 0; b < 4; ++b) out[4 + b] = static_cast<uint8_t>(len >> (24 - 8 * b));
  return out;
}

std::vector<uint8_t> encode_v2_compressed(const HdrHistogram& histogram) {
  const std::vector<uint8_t> plain = encode_v2(histogram);
  uLongf compressed_size = compressBound(static_cast<uLong>(plain.size()));
  std::vector<uint8_t> out(kCompressedHeaderBytes + compressed_size);
  if (compress2(out.data() + kCompressedHeaderBytes, &compressed_size, plain.data(), static_cast<uLong>(plain.size()),
                Z_DEFAULT_COMPRESSION) != Z_OK) {
    throw HlogError("zlib: compress2 failed");
  }
  out.resize(kCompressedHeaderBytes + compressed_size);
  std::vector<uint8_t> header;
  put_u32(header, kV2CompressedEncodingCookie);
  put_u32(header, static_cast<uint32_t>(compressed_size));
  std::copy(header.begin(), header.end(), out.begin());
  return out;
}

std::string encode_compressed_base64(const HdrHistogram& histogram) {
  return base64_encode(encode_v2_compressed(histogram));
}

// ---- decoding ---------------------------------------------------------------

HdrHistogram decode_v2(std::span<const uint8_t> bytes) {
  if (bytes.size() < kV2HeaderBytes) {
    throw HlogError("V2 histogram: " + std::to_string(bytes.size()) + " bytes, shorter than the 40-byte header");
  }
  const V2Header h = parse_v2_header(bytes.data());
  HdrHistogram histogram = histogram_for_header(h);
  const size_t available = bytes.size() - kV2HeaderBytes;
  if (static_cast<size_t>(h.payload_bytes) != available) {
    throw HlogError("V2 histogram: header says " + std::to_string(h.payload_bytes) + " payload bytes, " +
                    std::to_string(available) + " present");
  }
  check_payload_length(h, histogram);
  decode_counts(bytes.subspan(kV2HeaderBytes), histogram);
  return histogram;
}

HdrHistogram decode_v2_compressed(std::span<const uint8_t> bytes) {
  if (bytes.size() < kCompressedHeaderBytes) {
    throw HlogError("V2 compressed histogram: " + std::to_string(bytes.size()) +
                    " bytes, shorter than its 8-byte header");
  }
  const uint32_t cookie = get_u32(bytes.data());
  const uint32_t base = cookie_base(cookie);
  if (base != kV2CompressedCookieBase) {
    if (base == kV1CompressedCookieBase) {
      throw HlogError("V2 compressed histogram: cookie " + hex(cookie) +
                      " is a V1 compressed encoding, which is not supported");
    }
    throw HlogError("V2 compressed histogram: bad cookie " + hex(cookie) + " (expected " +
                    hex(kV2CompressedEncodingCookie) + ")");
  }
  const uint32_t compressed_bytes = get_u32(bytes.data() + 4);
  const size_t available = bytes.size() - kCompressedHeaderBytes;
  if (compressed_bytes != available) {
    throw HlogError("V2 compressed histogram: header says " + std::to_string(compressed_bytes) + " compressed bytes, " +
                    std::to_string(available) + " present");
  }
  if (available > std::numeric_limits<uInt>::max()) {
    throw HlogError("V2 compressed histogram: too large");
  }
  Inflater inflater(bytes.data() + kCompressedHeaderBytes, available);
  uint8_t header_bytes[kV2HeaderBytes];
  inflater.read_exactly(header_bytes, kV2HeaderBytes, "header");
  const V2Header h = parse_v2_header(header_bytes);
  HdrHistogram histogram = histogram_for_header(h);
  check_payload_length(h, histogram);
  // Inflate in chunks so memory follows the data actually present, not the
  // length the header claims.
  std::vector<uint8_t> payload;
  size_t remaining = static_cast<size_t>(h.payload_bytes);
  constexpr size_t kChunkBytes = 64 * 1024;
  while (remaining > 0) {
    const size_t n = std::min(remaining, kChunkBytes);
    const size_t old_size = payload.size();
    payload.resize(old_size + n);
    inflater.read_exactly(payload.data() + old_size, n, "counts payload");
    remaining -= n;
  }
  inflater.expect_end();
  decode_counts(payload, histogram);
  return histogram;
}

HdrHistogram decode_compressed_base64(std::string_view base64) {
  const std::vector<uint8_t> bytes = base64_decode(base64);
  return decode_v2_compressed(bytes);
}

// ---- log writer -------------------------------------------------------------

HlogWriter::HlogWriter(std::ostream& out) : out_(out) {}

void HlogWriter::flush_or_throw() {
  out_.flush();
  if (!out_) throw HlogError("hlog: write failed");
}

void HlogWriter::write_header(double start_time_s_epoch, std::string_view comment) {
  if (!std::isfinite(start_time_s_epoch) || start_time_s_epoch < 0) {
    throw std::invalid_argument("HlogWriter: start time must be finite and >= 0");
  }
  std::string text;
  if (!comment.empty()) {
    // A comment must stay one '#' line whatever it contains.
    std::string one_line(comment);
    std::replace_if(
        one_line.begin(), one_line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    text += "#[" + one_line + "]\n";
  }
  text += "#[Histogram log format version 1.3]\n";
  const std::time_t whole_seconds = static_cast<std::time_t>(start_time_s_epoch);
  std::tm utc{};
  gmtime_r(&whole_seconds, &utc);
  char date[64];
  std::strftime(date, sizeof(date), "%a %b %d %H:%M:%S UTC %Y", &utc);
  const std::string start = format_3_decimals(start_time_s_epoch);
  text += "#[StartTime: " + start + " (seconds since epoch), " + date + "]\n";
  text += "#[BaseTime: " + start + " (seconds since epoch)]\n";
  text += "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
  out_ << text;
  flush_or_throw();
}

void HlogWriter::write_interval(double start_s, double duration_s, const HdrHistogram& histogram, std::string_view tag,
                                double max_value_unit_ratio) {
  if (!std::isfinite(start_s) || start_s < 0 || !std::isfinite(duration_s) || duration_s < 0) {
    throw std::invalid_argument("HlogWriter: interval start and duration must be finite and >= 0");
  }
  if (!std::isfinite(max_value_unit_ratio) || max_value_unit_ratio <= 0) {
    throw std::invalid_argument("HlogWriter: max_value_unit_ratio must be > 0");
  }
  for (const char c : tag) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ',' || std::isspace(u) || u < 0x20 || u == 0x7f) {
      throw std::invalid_argument("HlogWriter: tag '" + std::string(tag) +
                                  "' must not contain commas, whitespace or control characters");
    }
  }
  std::string line;
  if (!tag.empty()) line += "Tag=" + std::string(tag) + ",";
  line += format_3_decimals(start_s) + "," + format_3_decimals(duration_s) + "," +
          format_3_decimals(static_cast<double>(histogram.max()) / max_value_unit_ratio) + "," +
          encode_compressed_base64(histogram) + "\n";
  out_ << line;
  flush_or_throw();
}

// ---- log reader -------------------------------------------------------------

namespace {

double parse_number(std::string_view field, const char* what, size_t line_number) {
  const std::string_view f = trim(field);
  double v = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v)) {
    throw HlogError("hlog line " + std::to_string(line_number) + ": " + what + " '" + std::string(field.substr(0, 64)) +
                    "' is not a number");
  }
  return v;
}

}  // namespace

std::vector<HlogInterval> read_hlog(std::istream& in) {
  std::vector<HlogInterval> intervals;
  std::string raw;
  size_t line_number = 0;
  while (std::getline(in, raw)) {
    ++line_number;
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.front() == '#') {
      constexpr std::string_view kVersion = "#[Histogram log format version ";
      if (line.starts_with(kVersion) && !line.substr(kVersion.size()).starts_with("1.")) {
        throw HlogError("hlog line " + std::to_string(line_number) + ": unsupported log format version in '" +
                        std::string(line.substr(0, 80)) + "' (1.x expected)");
      }
      continue;
    }
    if (line.starts_with("\"StartTimestamp\"")) continue;  // the CSV legend

    std::string tag;
    if (line.starts_with("Tag=")) {
      const size_t comma = line.find(',');
      if (comma == std::string_view::npos) {
        throw HlogError("hlog line " + std::to_string(line_number) + ": 'Tag=' without the ',' that ends the tag");
      }
      tag = std::string(line.substr(4, comma - 4));
      line.remove_prefix(comma + 1);
    }
    std::array<std::string_view, 4> fields;
    size_t n_fields = 0;
    size_t pos = 0;
    while (true) {
      const size_t comma = line.find(',', pos);
      if (n_fields == fields.size()) {
        n_fields = fields.size() + 1;  // too many
        break;
      }
      fields[n_fields++] = line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    if (n_fields != fields.size()) {
      throw HlogError("hlog line " + std::to_string(line_number) +
                      ": expected 4 comma-separated fields "
                      "(StartTimestamp,Interval_Length,Interval_Max,Interval_Compressed_Histogram)");
    }
    const double start_s = parse_number(fields[0], "StartTimestamp", line_number);
    const double duration_s = parse_number(fields[1], "Interval_Length", line_number);
    const double max_value = parse_number(fields[2], "Interval_Max", line_number);
    try {
      intervals.push_back(
          HlogInterval{std::move(tag), start_s, duration_s, max_value, decode_compressed_base64(fields[3])});
    } catch (const HlogError& e) {
      throw HlogError("hlog line " + std::to_string(line_number) + ": " + e.what());
    }
  }
  if (in.bad()) throw HlogError("hlog: read error after line " + std::to_string(line_number));
  return intervals;
}

}  // namespace tailscope
