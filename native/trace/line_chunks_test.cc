// FileLineChunks: chunks read independently (in any order) tile the file
// exactly, each of whole lines followed by zero padding; gzip data and pipes
// are left to LineChunks; a line too long and a file that shrank are said.
#include "trace/line_chunks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tailscope::trace {
namespace {

namespace fs = std::filesystem;
constexpr std::size_t kPadding = 64;

fs::path write_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("line-chunks-test-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// Lines of random lengths (some far longer than a chunk), with or without a
// newline at the end of the file.
std::string random_lines(std::mt19937& rng, std::size_t lines, bool final_newline) {
  std::string text;
  std::uniform_int_distribution<int> length(0, 40);
  std::uniform_int_distribution<int> rare(0, 9);
  for (std::size_t i = 0; i < lines; ++i) {
    const int n = rare(rng) == 0 ? length(rng) * 25 : length(rng);
    for (int k = 0; k < n; ++k) text += static_cast<char>('a' + (i + k) % 26);
    if (i + 1 < lines || final_newline) text += '\n';
  }
  return text;
}

TEST(FileLineChunksTest, ChunksReadInAnyOrderTileTheFileInWholeLines) {
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    const std::string text = random_lines(rng, 1 + rng() % 200, round % 2 == 0);
    const fs::path path = write_file("tile", text);
    for (std::size_t target : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
      const FileLineChunks chunks(path.string(), target, 1 << 20, kPadding);
      ASSERT_TRUE(chunks.ok());
      ASSERT_EQ(chunks.count(), (text.size() + target - 1) / target);
      std::vector<std::uint64_t> order(chunks.count());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::string> got(order.size());
      ChunkText chunk;  // one buffer reused, as a worker does
      for (std::uint64_t i : order) {
        ASSERT_EQ(chunks.read(i, chunk), LineChunks::Status::kChunk) << "chunk " << i;
        got[i] = std::string(chunk.view());
        for (std::size_t k = 0; k < kPadding; ++k) {
          ASSERT_EQ(chunk.data[chunk.begin + chunk.size + k], '\0') << "padding after chunk " << i;
        }
      }
      std::string joined;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const std::string& c = got[i];
        if (!c.empty()) {
          // Starts a line, ends one (or the file).
          EXPECT_TRUE(joined.empty() || joined.back() == '\n') << "target " << target << " chunk " << i;
          EXPECT_TRUE(c.back() == '\n' || joined.size() + c.size() == text.size());
        }
        joined += c;
      }
      ASSERT_TRUE(joined == text) << "target " << target << ": the chunks do not tile the file";
    }
    fs::remove(path);
  }
}

TEST(FileLineChunksTest, ALineRunningFarPastItsChunkIsSaid) {
  const std::string text = "short\n" + std::string(5000, 'x') + "\nend\n";
  const fs::path path = write_file("long", text);
  const FileLineChunks chunks(path.string(), 16, 1000, kPadding);
  ChunkText chunk;
  EXPECT_EQ(chunks.read(0, chunk), LineChunks::Status::kLineTooLong);
  // A chunk inside the line is empty: the line is chunk 0's.
  EXPECT_EQ(chunks.read(3, chunk), LineChunks::Status::kChunk);
  EXPECT_EQ(chunk.size, 0U);
  // With room for it, chunk 0 holds the whole line.
  const FileLineChunks roomy(path.string(), 16, 8000, kPadding);
  ASSERT_EQ(roomy.read(0, chunk), LineChunks::Status::kChunk);
  EXPECT_EQ(chunk.view(), text.substr(0, 6 + 5001));
  fs::remove(path);
}

TEST(FileLineChunksTest, AFileThatShrankAfterOpeningIsAReadError) {
  const std::string text(4096, '\n');
  const fs::path path = write_file("shrink", text);
  const FileLineChunks chunks(path.string(), 1024, 1 << 20, kPadding);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
  ChunkText chunk;
  EXPECT_EQ(chunks.read(2, chunk), LineChunks::Status::kStreamError);
  fs::remove(path);
}

TEST(FileLineChunksTest, GzipDataPipesAndMissingFilesAreLeftToTheStreamReader) {
  const fs::path gz = write_file("gz", std::string("\x1f\x8b\x08\x00", 4) + "rest");
  EXPECT_FALSE(FileLineChunks(gz.string(), 16, 1 << 20, kPadding).ok());
  EXPECT_FALSE(FileLineChunks("-", 16, 1 << 20, kPadding).ok());
  EXPECT_FALSE(FileLineChunks(gz.string() + ".missing", 16, 1 << 20, kPadding).ok());
  fs::remove(gz);
  const fs::path empty = write_file("empty", "");
  const FileLineChunks none(empty.string(), 16, 1 << 20, kPadding);
  EXPECT_TRUE(none.ok());
  EXPECT_EQ(none.count(), 0U);
  fs::remove(empty);
}

}  // namespace
}  // namespace tailscope::trace
