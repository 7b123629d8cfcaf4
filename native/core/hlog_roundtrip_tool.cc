// tailscope-hlog-fixture: the C++ half of tests/test_hlog_interop.py.
//
//   tailscope-hlog-fixture write --out FILE [--seed N] [--intervals K] [--samples-per-interval N]
//       writes an .hlog of K intervals of a latency-like data set drawn from
//       the seed, and prints what our histogram says about it as JSON;
//   tailscope-hlog-fixture decode < lines-of-base64
//       decodes each line and prints the same statistics (and our re-encoding);
//   tailscope-hlog-fixture read FILE
//       reads an .hlog with read_hlog and prints the statistics per interval.
//
// Every JSON document carries, per histogram: total_count, min, max, mean and
// value_at_percentile for the percentiles listed in "percentiles".
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/hdr_histogram.h"
#include "core/hlog.h"

namespace tailscope {
namespace {

// Percentile keys as the JSON spells them; chosen so that with sample counts
// that are multiples of 100000 every rank is an exact integer (see the pytest).
constexpr const char* kPercentiles[] = {"0", "10", "25", "50", "75", "90", "99", "99.9", "99.99", "99.999", "100"};

// splitmix64: a fixed generator, so a seed means the same data everywhere.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Latency-like ns: ~90 % log-normal around 200 us, 9 % slow path 2-10 ms,
// 1 % Pareto tail (alpha 1.3) from 10 ms up, a few exact zeros.
int64_t draw_latency_ns(SplitMix64& rng, int64_t highest) {
  const double pick = rng.unit();
  double v;
  if (pick < 0.0005) {
    v = 0;
  } else if (pick < 0.9) {
    const double u1 = std::max(rng.unit(), 1e-300), u2 = rng.unit();
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    v = std::exp(std::log(200'000.0) + 0.6 * normal);
  } else if (pick < 0.99) {
    v = 2e6 + rng.unit() * 8e6;
  } else {
    v = 1e7 / std::pow(1.0 - rng.unit(), 1.0 / 1.3);
  }
  return std::min<int64_t>(static_cast<int64_t>(v), highest);
}

std::string json_stats(const HdrHistogram& h) {
  std::string out = "{\"total_count\":" + std::to_string(h.total_count()) + ",\"min\":" + std::to_string(h.min()) +
                    ",\"max\":" + std::to_string(h.max());
  char mean[64];
  std::snprintf(mean, sizeof(mean), "%.17g", h.mean());
  out += ",\"mean\":" + std::string(mean) + ",\"values\":{";
  bool first = true;
  for (const char* p : kPercentiles) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += p;
    out += "\":";
    out += std::to_string(h.value_at_percentile(std::stod(p)));
  }
  out += "}}";
  return out;
}

// Tags come from files we did not write; keep the JSON valid whatever they hold.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// {"a":1} + ",\"b\":2" -> {"a":1,"b":2}
std::string with_fields(std::string object, const std::string& fields) {
  object.pop_back();
  object += fields;
  object += '}';
  return object;
}

void append_item(std::string& list, const std::string& item) {
  if (!list.empty()) list += ',';
  list += item;
}

std::string json_percentile_list() {
  std::string items;
  for (const char* p : kPercentiles) append_item(items, json_string(p));
  return "[" + items + "]";
}

int usage(const char* why) {
  std::fprintf(stderr,
               "tailscope-hlog-fixture: %s\n"
               "usage: tailscope-hlog-fixture write --out FILE [--seed N] [--intervals K] "
               "[--samples-per-interval N]\n"
               "       tailscope-hlog-fixture decode < base64-lines\n"
               "       tailscope-hlog-fixture read FILE\n",
               why);
  return 2;
}

int64_t parse_positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) {
    throw std::invalid_argument(std::string(flag) + " needs a non-negative integer, got '" + text + "'");
  }
  return v;
}

int run_write(int argc, char** argv) {
  std::string out_path;
  uint64_t seed = 1;
  int64_t intervals = 3;
  int64_t samples = 100'000;
  for (int i = 2; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + std::string(flag)).c_str());
    const char* value = argv[++i];
    if (flag == "--out") {
      out_path = value;
    } else if (flag == "--seed") {
      seed = static_cast<uint64_t>(parse_positive("--seed", value));
    } else if (flag == "--intervals") {
      intervals = parse_positive("--intervals", value);
    } else if (flag == "--samples-per-interval") {
      samples = parse_positive("--samples-per-interval", value);
    } else {
      return usage(("unknown flag " + std::string(flag)).c_str());
    }
  }
  if (out_path.empty()) return usage("write needs --out FILE");
  if (intervals < 1 || intervals > 10'000) return usage("--intervals must be in 1..10000");

  SplitMix64 rng{seed};
  const double start_time_s = 1'700'000'000.0;
  HdrHistogram total = HdrHistogram::for_latency_ns();
  std::string json_intervals;
  // Write to a temporary name and rename, so a failed run leaves no half-written log.
  const std::string tmp_path = out_path + ".tmp";
  {
    std::ofstream file(tmp_path, std::ios::binary | std::ios::trunc);
    if (!file) throw std::runtime_error("cannot open " + tmp_path + " for writing");
    HlogWriter writer(file);
    writer.write_header(start_time_s, "Logged with tailscope-hlog-fixture");
    for (int64_t k = 0; k < intervals; ++k) {
      HdrHistogram h = HdrHistogram::for_latency_ns();
      for (int64_t i = 0; i < samples; ++i) h.record(draw_latency_ns(rng, h.highest_trackable_value()));
      const std::string tag = k % 2 == 1 ? "odd" : "";
      writer.write_interval(static_cast<double>(k), 1.0, h, tag);
      total.merge(h);
      append_item(json_intervals,
                  with_fields(json_stats(h),
                              ",\"tag\":" + json_string(tag) + ",\"start_s\":" + json_double(static_cast<double>(k)) +
                                  ",\"duration_s\":1.0,\"base64\":\"" + encode_compressed_base64(h) + "\""));
    }
  }
  std::filesystem::rename(tmp_path, out_path);
  std::printf("{\"percentiles\":%s,\"intervals\":[%s],\"total\":%s}\n", json_percentile_list().c_str(),
              json_intervals.c_str(), json_stats(total).c_str());
  return 0;
}

int run_decode() {
  std::string line;
  std::string items;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const HdrHistogram h = decode_compressed_base64(line);
    char layout[160];
    std::snprintf(layout, sizeof(layout), ",\"lowest\":%" PRId64 ",\"highest\":%" PRId64 ",\"significant_figures\":%d",
                  h.lowest_discernible_value(), h.highest_trackable_value(), h.significant_figures());
    append_item(items, with_fields(json_stats(h),
                                   std::string(layout) + ",\"reencoded\":\"" + encode_compressed_base64(h) + "\""));
  }
  std::printf("{\"percentiles\":%s,\"histograms\":[%s]}\n", json_percentile_list().c_str(), items.c_str());
  return 0;
}

int run_read(const char* path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(std::string("cannot open ") + path);
  const std::vector<HlogInterval> intervals = read_hlog(file);
  std::string items;
  for (const HlogInterval& interval : intervals) {
    append_item(items,
                with_fields(json_stats(interval.histogram), ",\"tag\":" + json_string(interval.tag) +
                                                                ",\"start_s\":" + json_double(interval.start_s) +
                                                                ",\"duration_s\":" + json_double(interval.duration_s) +
                                                                ",\"max_value\":" + json_double(interval.max_value)));
  }
  std::printf("{\"percentiles\":%s,\"intervals\":[%s]}\n", json_percentile_list().c_str(), items.c_str());
  return 0;
}

}  // namespace
}  // namespace tailscope

int main(int argc, char** argv) {
  if (argc < 2) return tailscope::usage("missing command");
  const std::string_view command = argv[1];
  try {
    if (command == "write") return tailscope::run_write(argc, argv);
    if (command == "decode" && argc == 2) return tailscope::run_decode();
    if (command == "read" && argc == 3) return tailscope::run_read(argv[2]);
    return tailscope::usage(("bad command line for '" + std::string(command) + "'").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tailscope-hlog-fixture: %s\n", e.what());
    return 1;
  }
}
