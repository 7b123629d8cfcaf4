// V2 encoding and .hlog: round trips, vectors produced by the PyPI
// hdrhistogram package, and hostile input (which must end in HlogError).
#include "core/hlog.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tailscope {
namespace {

void expect_same_counts(const HdrHistogram& a, const HdrHistogram& b) {
  ASSERT_TRUE(a.same_layout(b));
  ASSERT_EQ(a.total_count(), b.total_count());
  ASSERT_EQ(a.min(), b.min());
  ASSERT_EQ(a.max(), b.max());
  for (size_t i = 0; i < a.counts_array_length(); ++i) {
    ASSERT_EQ(a.count_at_index(i), b.count_at_index(i)) << "index " << i;
  }
}

HdrHistogram heavy_tailed(uint64_t seed, int n, HdrHistogram h = HdrHistogram::for_latency_ns()) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < n; ++i) {
    const double v = 20'000.0 / std::pow(1.0 - unit(rng), 1.0 / 1.2);
    h.record(std::min<int64_t>(static_cast<int64_t>(v), h.highest_trackable_value()));
  }
  return h;
}

// A compressed encoding around an arbitrary (possibly invalid) V2 body.
std::vector<uint8_t> compress_raw(const std::vector<uint8_t>& body) {
  uLongf size = compressBound(static_cast<uLong>(body.size()));
  std::vector<uint8_t> out(8 + size);
  EXPECT_EQ(compress2(out.data() + 8, &size, body.data(), static_cast<uLong>(body.size()), 6), Z_OK);
  out.resize(8 + size);
  const uint32_t cookie = kV2CompressedEncodingCookie;
  const uint32_t len = static_cast<uint32_t>(size);
  for (int b = 0; b < 4; ++b) {
    out[b] = static_cast<uint8_t>(cookie >> (24 - 8 * b));
    out[4 + b] = static_cast<uint8_t>(len >> (24 - 8 * b));
  }
  return out;
}

void set_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) {
  for (int b = 0; b < 4; ++b) bytes[at + b] = static_cast<uint8_t>(v >> (24 - 8 * b));
}
void set_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (int b = 0; b < 8; ++b) bytes[at + b] = static_cast<uint8_t>(v >> (56 - 8 * b));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const HlogError& e) {
    return e.what();
  }
  return "(no HlogError)";
}

// ---- round trips --------------------------------------------------------------

TEST(V2Encoding, HeaderFieldsAreWhatHdrHistogramExpects) {
  HdrHistogram h(1000, 10'000'000'000, 2);
  h.record(5555);
  const std::vector<uint8_t> bytes = encode_v2(h);
  ASSERT_GE(bytes.size(), kV2HeaderBytes);
  const auto u32 = [&](size_t at) {
    return (uint32_t{bytes[at]} << 24) | (uint32_t{bytes[at + 1]} << 16) | (uint32_t{bytes[at + 2]} << 8) |
           bytes[at + 3];
  };
  EXPECT_EQ(u32(0), 0x1c849313u);                    // V2 cookie, 8-byte word size
  EXPECT_EQ(u32(4), bytes.size() - kV2HeaderBytes);  // payload length
  EXPECT_EQ(u32(8), 0u);                             // normalizing index offset
  EXPECT_EQ(u32(12), 2u);                            // significant digits
  EXPECT_EQ(u32(16), 0u);
  EXPECT_EQ(u32(20), 1000u);                                            // lowest
  EXPECT_EQ((uint64_t{u32(24)} << 32) | u32(28), 10'000'000'000u);      // highest
  EXPECT_EQ((uint64_t{u32(32)} << 32) | u32(36), 0x3ff0000000000000u);  // 1.0
  // Compressed form: starts with "HISTFAA", like every Java/Python .hlog line.
  EXPECT_EQ(encode_compressed_base64(h).rfind("HISTFAA", 0), 0u);
}

TEST(V2Encoding, RoundTripKeepsEveryCount) {
  std::vector<HdrHistogram> cases;
  cases.push_back(HdrHistogram::for_latency_ns());  // empty
  cases.push_back(heavy_tailed(1, 50'000));
  cases.push_back(heavy_tailed(2, 10, HdrHistogram(1000, 10'000'000'000, 2)));
  cases.push_back(heavy_tailed(3, 5'000, HdrHistogram(1, int64_t{1} << 62, 5)));
  cases.push_back(heavy_tailed(4, 100, HdrHistogram(7, 1'000'000'000, 0)));
  HdrHistogram big_counts = HdrHistogram::for_latency_ns();
  big_counts.record_n(0, int64_t{1} << 61);  // needs the 9th varint byte
  big_counts.record_n(3'600'000'000'000, 123'456'789'012);
  cases.push_back(big_counts);
  HdrHistogram single = HdrHistogram::for_latency_ns();
  single.record(1);
  cases.push_back(single);

  for (const HdrHistogram& h : cases) {
    expect_same_counts(decode_v2(encode_v2(h)), h);
    expect_same_counts(decode_v2_compressed(encode_v2_compressed(h)), h);
    const HdrHistogram back = decode_compressed_base64(encode_compressed_base64(h));
    expect_same_counts(back, h);
    EXPECT_EQ(back.value_at_percentile(99.99), h.value_at_percentile(99.99));
    EXPECT_EQ(back.mean(), h.mean());
  }
}

TEST(V2Encoding, DecodesWhatThePythonPackageEncoded) {
  // hdrh.histogram.HdrHistogram(1, 3600000000000, 3) with 0, 1, 2, 1000, 2047,
  // 2048, 2049, 123456, 1000000, 99999999, 3600000000000 recorded once and
  // 5000 recorded 250 times, then .encode().
  const HdrHistogram h = decode_compressed_base64(
      "HISTFAAAAD14nJNpmSzMwMAgzQABzFCaEch0M9ixgMH+A0SAiYnpJD/TagEmloPCX5hPezGtNWBamsm0+hMjEwAskgx4");
  EXPECT_EQ(h.lowest_discernible_value(), 1);
  EXPECT_EQ(h.highest_trackable_value(), 3'600'000'000'000);
  EXPECT_EQ(h.significant_figures(), 3);
  EXPECT_EQ(h.total_count(), 261);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 3'601'330'077'695);
  // The package's get_value_at_percentile for 0/50/90/100.
  EXPECT_EQ(h.value_at_percentile(0), 0);
  EXPECT_EQ(h.value_at_percentile(50), 5003);
  EXPECT_EQ(h.value_at_percentile(90), 5003);
  EXPECT_EQ(h.value_at_percentile(100), 3'601'330'077'695);
  // p99 of 261 samples is rank ceil(258.39) = 259 (1'000'000), as in Java
  // HdrHistogram; the Python package rounds the rank to nearest (258, i.e.
  // 123'456, below which only 98.9 % of the samples lie) and says 123'519.
  EXPECT_EQ(h.value_at_percentile(99), 1'000'447);

  // hdrh HdrHistogram(1000, 10**10, 2) with 1, 999, 1000, 5555, 10**9 three times each.
  const HdrHistogram coarse =
      decode_compressed_base64("HISTFAAAACh4nJNpmSzMwMDAzgABTBCK+QWIHcL9hMH+A0SEjYef7agsGwB8DAW+");
  EXPECT_EQ(coarse.total_count(), 15);
  EXPECT_EQ(coarse.min(), 0);
  EXPECT_EQ(coarse.max(), 1'002'438'655);
  EXPECT_EQ(coarse.value_at_percentile(50), 1023);
  EXPECT_EQ(coarse.value_at_percentile(90), 1'002'438'655);
}

// ---- hostile input --------------------------------------------------------------

TEST(V2Decoding, RejectsWrongCookies) {
  std::vector<uint8_t> plain = encode_v2(heavy_tailed(5, 100));
  std::vector<uint8_t> compressed = encode_v2_compressed(heavy_tailed(5, 100));
  std::vector<uint8_t> bad = plain;
  set_u32(bad, 0, 0xdeadbeef);
  EXPECT_NE(error_of([&] { decode_v2(bad); }).find("bad cookie 0xdeadbeef"), std::string::npos);
  set_u32(bad, 0, 0x1c849381);  // V1 encoding
  EXPECT_NE(error_of([&] { decode_v2(bad); }).find("V0/V1"), std::string::npos);
  // A plain encoding where a compressed one is expected, and vice versa.
  EXPECT_NE(error_of([&] { decode_v2_compressed(plain); }).find("bad cookie"), std::string::npos);
  EXPECT_NE(error_of([&] { decode_v2(compressed); }).find("bad cookie"), std::string::npos);
  // Inside the deflate stream the V2 body must carry the encoding cookie.
  std::vector<uint8_t> body = plain;
  set_u32(body, 0, kV2CompressedEncodingCookie);
  EXPECT_NE(error_of([&] { decode_v2_compressed(compress_raw(body)); }).find("bad cookie"), std::string::npos);
}

TEST(V2Decoding, RejectsEveryTruncation) {
  const std::vector<uint8_t> plain = encode_v2(heavy_tailed(6, 2000));
  for (size_t n = 0; n < plain.size(); ++n) {
    std::vector<uint8_t> cut(plain.begin(), plain.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(decode_v2(cut), HlogError) << "length " << n;
  }
  const std::vector<uint8_t> compressed = encode_v2_compressed(heavy_tailed(6, 2000));
  for (size_t n = 0; n < compressed.size(); ++n) {
    std::vector<uint8_t> cut(compressed.begin(), compressed.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(decode_v2_compressed(cut), HlogError) << "length " << n;
    // Truncated but with the length field fixed up to match: the deflate stream itself is cut.
    if (n >= 8) {
      set_u32(cut, 4, static_cast<uint32_t>(n - 8));
      EXPECT_THROW(decode_v2_compressed(cut), HlogError) << "length " << n;
    }
  }
  const std::string base64 = encode_compressed_base64(heavy_tailed(6, 2000));
  for (size_t n = 0; n < base64.size(); ++n) {
    EXPECT_THROW(decode_compressed_base64(base64.substr(0, n)), HlogError) << "length " << n;
  }
}

TEST(V2Decoding, RejectsHeadersClaimingAbsurdSizes) {
  const HdrHistogram h = heavy_tailed(7, 100);
  std::vector<uint8_t> compressed = encode_v2_compressed(h);
  set_u32(compressed, 4, 0xffffffffu);
  EXPECT_NE(error_of([&] { decode_v2_compressed(compressed); }).find("compressed bytes"), std::string::npos);

  const std::vector<uint8_t> plain = encode_v2(h);
  std::vector<uint8_t> body = plain;
  set_u32(body, 4, 0x7fffffffu);  // payload length far beyond 9 bytes per count
  EXPECT_NE(error_of([&] { decode_v2_compressed(compress_raw(body)); }).find("exceeds"), std::string::npos);
  EXPECT_THROW(decode_v2(body), HlogError);
  set_u32(body, 4, 0x80000000u);  // negative
  EXPECT_NE(error_of([&] { decode_v2(body); }).find("negative payload length"), std::string::npos);

  // Payload length within the layout's bound but far longer than the data.
  body = plain;
  set_u32(body, 4, 200'000);
  EXPECT_NE(error_of([&] { decode_v2_compressed(compress_raw(body)); }).find("ends inside"), std::string::npos);

  const auto with_layout = [&](uint32_t digits, uint64_t lowest, uint64_t highest, uint32_t offset = 0) {
    std::vector<uint8_t> b = plain;
    set_u32(b, 8, offset);
    set_u32(b, 12, digits);
    set_u64(b, 16, lowest);
    set_u64(b, 24, highest);
    return error_of([&] { decode_v2_compressed(compress_raw(b)); });
  };
  EXPECT_NE(with_layout(6, 1, 1000).find("invalid layout"), std::string::npos);
  EXPECT_NE(with_layout(3, 0, 1000).find("invalid layout"), std::string::npos);
  EXPECT_NE(with_layout(3, 1ull << 63, 1000).find("invalid layout"), std::string::npos);
  EXPECT_NE(with_layout(3, 100, 150).find("invalid layout"), std::string::npos);
  EXPECT_NE(with_layout(5, 1ull << 60, (1ull << 63) - 1).find("invalid layout"), std::string::npos);
  EXPECT_NE(with_layout(3, 1, 3'600'000'000'000, 5).find("normalizing index offset"), std::string::npos);
}

TEST(V2Decoding, RejectsPayloadsThatOverrunTheCountsArray) {
  HdrHistogram layout(1, 1000, 1);  // small counts array
  const size_t len = layout.counts_array_length();
  const auto decode_payload = [&](const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> b = encode_v2(layout);
    b.insert(b.end(), payload.begin(), payload.end());
    set_u32(b, 4, static_cast<uint32_t>(payload.size()));
    return error_of([&] { decode_v2(b); });
  };
  // Zero run of len-1 (zigzag 2*(len-1)-1), then 2 counts: one fits, one does not.
  const uint64_t run = 2 * (len - 1) - 1;
  std::vector<uint8_t> payload = {static_cast<uint8_t>((run & 0x7f) | 0x80), static_cast<uint8_t>(run >> 7), 2, 2};
  EXPECT_NE(decode_payload(payload).find("more counts"), std::string::npos);
  payload.pop_back();
  EXPECT_EQ(decode_payload(payload), "(no HlogError)");
  // A zero run past the end, including INT64_MIN (zigzag 0xff..ff).
  EXPECT_NE(decode_payload({0xff, 0x01}).find("zero run"), std::string::npos);
  EXPECT_NE(decode_payload({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}).find("zero run"), std::string::npos);
  // A varint cut short.
  EXPECT_NE(decode_payload({0x80, 0x80}).find("inside a varint"), std::string::npos);
  // Counts whose sum overflows int64: 2^62 (zigzag 2^63) three times.
  std::vector<uint8_t> huge = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
  std::vector<uint8_t> three_huge;
  for (int i = 0; i < 3; ++i) three_huge.insert(three_huge.end(), huge.begin(), huge.end());
  EXPECT_NE(decode_payload(three_huge).find("overflows"), std::string::npos);
}

TEST(V2Decoding, GarbageNeverCrashes) {
  std::mt19937_64 rng(99);
  const std::vector<uint8_t> valid = encode_v2_compressed(heavy_tailed(8, 3000));
  const std::vector<uint8_t> valid_plain = encode_v2(heavy_tailed(8, 3000));
  int decoded_anyway = 0;
  for (int round = 0; round < 3000; ++round) {
    // Random bytes behind a valid cookie, random bytes, and bit flips of valid encodings.
    std::vector<uint8_t> bytes(rng() % 120);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (round % 3 == 0 && bytes.size() >= 8) {
      set_u32(bytes, 0, kV2CompressedEncodingCookie);
      set_u32(bytes, 4, static_cast<uint32_t>(bytes.size() - 8));
    }
    EXPECT_THROW(decode_v2_compressed(bytes), HlogError);
    EXPECT_THROW(decode_v2(bytes), HlogError);

    std::vector<uint8_t> flipped = round % 2 ? valid : valid_plain;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) flipped[rng() % flipped.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    try {
      if (round % 2) {
        decode_v2_compressed(flipped);
      } else {
        decode_v2(flipped);
      }
      ++decoded_anyway;  // a flip inside a count can still be a valid histogram
    } catch (const HlogError&) {
    }
  }
  EXPECT_LT(decoded_anyway, 3000);
  for (const char* text :
       {"", "   ", "HISTFAA", "!!!!", "HISTFAAAAD14nJ=NpmSz",
        "====", "HISTFAAAAD14nJNpmSzMwMAgzQABzFCaEch0M9ixgMH+A0SAiYnpJD/TagEmloPCX5hPezGtNWBamsm0+hMjEwAskgx", "QUJD",
        "AAAAAAAAAAAA"}) {
    EXPECT_THROW(decode_compressed_base64(text), HlogError) << text;
  }
}

// ---- .hlog ------------------------------------------------------------------------

TEST(HlogWriter, WritesTheV13HeaderAndIntervalLines) {
  std::ostringstream out;
  HlogWriter writer(out);
  writer.write_header(1700000000.25, "Logged by tailscope test");
  HdrHistogram h = HdrHistogram::for_latency_ns();
  h.record(2'500'000);  // 2.5 ms
  writer.write_interval(0.0, 1.0, h);
  writer.write_interval(1.0, 1.0005, h, "load-gen");
  std::istringstream lines(out.str());
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  ASSERT_EQ(all.size(), 7u);
  EXPECT_EQ(all[0], "#[Logged by tailscope test]");
  EXPECT_EQ(all[1], "#[Histogram log format version 1.3]");
  EXPECT_EQ(all[2], "#[StartTime: 1700000000.250 (seconds since epoch), Tue Nov 14 22:13:20 UTC 2023]");
  EXPECT_EQ(all[3], "#[BaseTime: 1700000000.250 (seconds since epoch)]");
  EXPECT_EQ(all[4], "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"");
  // Interval_Max: max() = 2'500'607 ns (bucket top) in ms with 3 decimals.
  EXPECT_EQ(all[5], "0.000,1.000,2.501," + encode_compressed_base64(h));
  EXPECT_EQ(all[6].rfind("Tag=load-gen,1.000,1.000,2.501,HISTFAA", 0), 0u) << all[6];
}

TEST(HlogWriter, RejectsTagsAndTimesThatWouldBreakTheFormat) {
  std::ostringstream out;
  HlogWriter writer(out);
  const HdrHistogram h = HdrHistogram::for_latency_ns();
  EXPECT_THROW(writer.write_interval(0, 1, h, "a,b"), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(0, 1, h, "a b"), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(0, 1, h, "a\nb"), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(-1, 1, h), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(0, std::nan(""), h), std::invalid_argument);
  EXPECT_THROW(writer.write_interval(0, 1, h, {}, 0.0), std::invalid_argument);
  // A multi-line comment stays one comment line.
  writer.write_header(0, "two\nlines");
  EXPECT_EQ(out.str().rfind("#[two lines]\n", 0), 0u);
}

TEST(Hlog, WriteThenReadRoundTrip) {
  std::ostringstream out;
  HlogWriter writer(out);
  writer.write_header(1700000000.0, "round trip");
  std::vector<HdrHistogram> written;
  for (int i = 0; i < 5; ++i) {
    written.push_back(heavy_tailed(static_cast<uint64_t>(100 + i), 1000 * (i + 1)));
    writer.write_interval(i * 1.5, 1.5, written.back(), i % 2 ? "odd" : "");
  }
  written.push_back(HdrHistogram::for_latency_ns());  // an empty interval
  writer.write_interval(7.5, 1.5, written.back());

  std::istringstream in(out.str());
  const std::vector<HlogInterval> intervals = read_hlog(in);
  ASSERT_EQ(intervals.size(), written.size());
  for (size_t i = 0; i < intervals.size(); ++i) {
    expect_same_counts(intervals[i].histogram, written[i]);
    EXPECT_EQ(intervals[i].tag, i % 2 && i < 5 ? "odd" : "");
    EXPECT_DOUBLE_EQ(intervals[i].start_s, static_cast<double>(i) * 1.5);
    EXPECT_DOUBLE_EQ(intervals[i].duration_s, 1.5);
    EXPECT_NEAR(intervals[i].max_value, static_cast<double>(written[i].max()) / 1e6, 0.0005);
  }
}

TEST(Hlog, ReadsALogWrittenByThePythonPackage) {
  // hdrh.log.HistogramLogWriter output (format 1.2, "%f" timestamps), CRLF line ends.
  const std::string log =
      "#[Histogram log format version 1.2]\r\n"
      "#[StartTime: 1700000000.000000 (seconds since epoch), 2023-11-14 22:13:20]\r\n"
      "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\r\n"
      "0.000000,1.000000,3601330.000000,"
      "HISTFAAAAD14nJNpmSzMwMAgzQABzFCaEch0M9ixgMH+A0SAiYnpJD/TagEmloPCX5hPezGtNWBamsm0+hMjEwAskgx4\r\n"
      "\r\n"
      "Tag=coarse,1.000000,1.000000,1002.000000,"
      "HISTFAAAACh4nJNpmSzMwMDAzgABTBCK+QWIHcL9hMH+A0SEjYef7agsGwB8DAW+\r\n";
  std::istringstream in(log);
  const std::vector<HlogInterval> intervals = read_hlog(in);
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].tag, "");
  EXPECT_EQ(intervals[0].histogram.total_count(), 261);
  EXPECT_DOUBLE_EQ(intervals[0].max_value, 3601330.0);
  EXPECT_EQ(intervals[1].tag, "coarse");
  EXPECT_EQ(intervals[1].start_s, 1.0);
  EXPECT_EQ(intervals[1].histogram.total_count(), 15);
}

TEST(Hlog, RejectsMalformedLinesWithTheirLineNumber) {
  const std::string header =
      "#[Histogram log format version 1.3]\n"
      "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
  const std::string good = "0.000,1.000,0.000," + encode_compressed_base64(heavy_tailed(1, 10)) + "\n";
  const auto error_for = [&](const std::string& bad_line) {
    std::istringstream in(header + good + bad_line + "\n" + good);
    return error_of([&] { read_hlog(in); });
  };
  const std::pair<std::string, std::string> cases[] = {
      {"abc,1.000,0.000,HISTFAA", "StartTimestamp 'abc' is not a number"},
      {"0.000,1.000,HISTFAA", "expected 4 comma-separated fields"},
      {"0.000,1.000,2.0,3.0,HISTFAA", "expected 4 comma-separated fields"},
      {"0.000,,0.000,HISTFAA", "Interval_Length '' is not a number"},
      {"0.000,1.000,nan,HISTFAA", "Interval_Max 'nan' is not a number"},
      {"0.000,1.000,0.000,HISTFAA", "base64: length"},
      {"0.000,1.000,0.000,QUJDREVGR0g=", "bad cookie 0x41424344"},
      {"0.000,1.000,0.000,QUJDRA==", "shorter than its 8-byte header"},
      {"0.000,1.000,0.000,not*base64", "base64"},
      {"Tag=oops", "'Tag=' without"},
      {"garbage", "expected 4 comma-separated fields"},
  };
  for (const auto& [line, message] : cases) {
    const std::string error = error_for(line);
    EXPECT_EQ(error.rfind("hlog line 4: ", 0), 0u) << line << " -> " << error;
    EXPECT_NE(error.find(message), std::string::npos) << line << " -> " << error;
  }
  std::istringstream future("#[Histogram log format version 2.0]\n");
  EXPECT_NE(error_of([&] { read_hlog(future); }).find("hlog line 1: unsupported log format version"),
            std::string::npos);
  std::istringstream empty("");
  EXPECT_TRUE(read_hlog(empty).empty());
}

}  // namespace
}  // namespace tailscope
