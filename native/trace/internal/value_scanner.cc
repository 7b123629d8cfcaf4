#include "trace/internal/value_scanner.h"

#include <bit>
#include <cstring>

#if defined(__AVX2__) || defined(__PCLMUL__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tailscope::trace::internal {

namespace {

// Bit i set when data[i] == c, for 64 bytes.
struct BlockMasks {
  std::uint64_t quote = 0;
  std::uint64_t backslash = 0;
  std::uint64_t open = 0;
  std::uint64_t close = 0;
};

#if defined(__AVX2__)
// Built for AVX2 where the host runs it (native/trace/CMakeLists.txt): two
// 32-byte loads per block. '{' and '[' (0x7B, 0x5B) differ only in bit 0x20,
// as do '}' and ']': setting that bit finds both with one compare.
inline std::uint64_t eq32(__m256i lo, __m256i hi, char c) {
  const __m256i v = _mm256_set1_epi8(c);
  const auto low = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, v)));
  const auto high = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, v)));
  return (static_cast<std::uint64_t>(high) << 32) | low;
}

inline BlockMasks block_masks(const char* p) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
  const __m256i bit = _mm256_set1_epi8(0x20);
  const __m256i lo_folded = _mm256_or_si256(lo, bit);
  const __m256i hi_folded = _mm256_or_si256(hi, bit);
  BlockMasks m;
  m.quote = eq32(lo, hi, '"');
  m.backslash = eq32(lo, hi, '\\');
  m.open = eq32(lo_folded, hi_folded, '{');
  m.close = eq32(lo_folded, hi_folded, '}');
  return m;
}
#elif defined(__SSE2__)
inline std::uint64_t eq16(__m128i chunk, char c, int shift) {
  const int bits = _mm_movemask_epi8(_mm_cmpeq_epi8(chunk, _mm_set1_epi8(c)));
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(bits)) << shift;
}

inline BlockMasks block_masks(const char* p) {
  BlockMasks m;
  for (int k = 0; k < 4; ++k) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    m.quote |= eq16(chunk, '"', 16 * k);
    m.backslash |= eq16(chunk, '\\', 16 * k);
    m.open |= eq16(chunk, '{', 16 * k) | eq16(chunk, '[', 16 * k);
    m.close |= eq16(chunk, '}', 16 * k) | eq16(chunk, ']', 16 * k);
  }
  return m;
}
#else
inline BlockMasks block_masks(const char* p) {
  BlockMasks m;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t bit = std::uint64_t{1} << i;
    switch (p[i]) {
      case '"':
        m.quote |= bit;
        break;
      case '\\':
        m.backslash |= bit;
        break;
      case '{':
      case '[':
        m.open |= bit;
        break;
      case '}':
      case ']':
        m.close |= bit;
        break;
      default:
        break;
    }
  }
  return m;
}
#endif

// Bit i = XOR of bits 0..i: set from an opening quote up to (not including)
// its closing quote.
inline std::uint64_t prefix_xor(std::uint64_t x) {
#if defined(__PCLMUL__)
  // Carry-less multiplication by all ones is the prefix XOR in one instruction.
  const __m128i product = _mm_clmulepi64_si128(_mm_set_epi64x(0, static_cast<long long>(x)), _mm_set1_epi8(-1), 0);
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(product));
#else
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
#endif
}

}  // namespace

ValueScanner::Status ValueScanner::scan_scalar(const char* data, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) {
    const char c = data[i];
    if (in_string_) {
      if (escaped_)
        escaped_ = false;
      else if (c == '\\')
        escaped_ = true;
      else if (c == '"')
        in_string_ = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        break;
      case '{':
      case '[':
        if (++depth_ > max_depth_) {
          end_ = i;
          return Status::kTooDeep;
        }
        break;
      case '}':
      case ']':
        if (--depth_ == 0) {
          end_ = i + 1;
          return Status::kComplete;
        }
        break;
      default:
        break;
    }
  }
  return Status::kNeedMore;
}

ValueScanner::Status ValueScanner::scan(const char* data, std::size_t from, std::size_t size) {
  std::size_t i = from;
  for (; i + 64 <= size; i += 64) {
    const BlockMasks m = block_masks(data + i);
    if (m.backslash != 0 || escaped_) {
      // Escapes are rare in traces: take the byte loop for this block.
      const Status s = scan_scalar(data, i, i + 64);
      if (s != Status::kNeedMore) return s;
      continue;
    }
    const std::uint64_t inside = prefix_xor(m.quote) ^ (in_string_ ? ~std::uint64_t{0} : 0);
    in_string_ = (inside >> 63) != 0;
    const std::uint64_t open = m.open & ~inside;
    const std::uint64_t close = m.close & ~inside;
    const int opens = std::popcount(open);
    const int closes = std::popcount(close);
    if (closes < depth_ && depth_ + opens <= max_depth_) {
      depth_ += opens - closes;  // cannot reach 0 nor the limit in this block
      continue;
    }
    for (std::uint64_t all = open | close; all != 0; all &= all - 1) {
      const int bit = std::countr_zero(all);
      if ((open >> bit) & 1) {
        if (++depth_ > max_depth_) {
          end_ = i + static_cast<std::size_t>(bit);
          return Status::kTooDeep;
        }
      } else if (--depth_ == 0) {
        end_ = i + static_cast<std::size_t>(bit) + 1;
        return Status::kComplete;
      }
    }
  }
  return scan_scalar(data, i, size);
}

}  // namespace tailscope::trace::internal
