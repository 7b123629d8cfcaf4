#include "core/result_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace tailscope {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("tailscope-rw-" + std::to_string(getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ResultWriter, WritesAndReplacesWholeFile) {
  fs::path dir = temp_dir();
  fs::path file = dir / "r.json";
  write_file_atomic(file, "first");
  EXPECT_EQ(slurp(file), "first");
  write_file_atomic(file, "second, longer");
  EXPECT_EQ(slurp(file), "second, longer");
  // Nothing but the target is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

TEST(ResultWriter, MissingFolderIsAClearError) {
  fs::path dir = temp_dir();
  fs::path missing = dir / "no-such-folder" / "r.json";
  try {
    write_file_atomic(missing, "x");
    FAIL() << "write into a missing folder succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-folder"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ResultWriter, FullDiskKeepsOldFileAndLeavesNoTemp) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG past the limit, the same
  // failure path as ENOSPC on a full disk, without needing a tiny filesystem.
  fs::path dir = temp_dir();
  fs::path file = dir / "keep.json";
  write_file_atomic(file, "old contents");
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string big(64 * 1024, 'x');
  bool threw = false;
  try {
    write_file_atomic(file, big);
  } catch (const std::runtime_error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("keep.json"), std::string::npos) << e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(slurp(file), "old contents");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

TEST(ResultWriter, ParentIsAFileIsAnError) {
  fs::path dir = temp_dir();
  fs::path file = dir / "plain";
  write_file_atomic(file, "data");
  EXPECT_THROW(write_file_atomic(file / "child.json", "x"), std::runtime_error);
  EXPECT_EQ(slurp(file), "data");
  fs::remove_all(dir);
}

// Pieces of 256 KiB and more are written without a copy into the buffer,
// after what the buffer holds: the bytes land in the order appended.
TEST(ResultWriter, LargeAndSmallAppendsKeepTheirOrder) {
  fs::path dir = temp_dir();
  fs::path file = dir / "mixed.ndjson";
  std::string expected;
  {
    AtomicFileWriter writer(file);
    const std::size_t sizes[] = {10, 256 << 10, 3, (256 << 10) - 1, 300 << 10, 300 << 10, 1, 2 << 20, 7};
    char fill = 'a';
    for (const std::size_t n : sizes) {
      const std::string piece(n, fill++);
      writer.append(piece);
      expected += piece;
    }
    writer.commit();
  }
  EXPECT_TRUE(slurp(file) == expected) << "the file's bytes are not the appends in order";
  fs::remove_all(dir);
}

TEST(ResultWriter, StreamedFileAppearsOnlyOnCommit) {
  fs::path dir = temp_dir();
  fs::path file = dir / "lines.ndjson";
  {
    AtomicFileWriter writer(file);
    writer.append("{\"a\": 1}\n");
    writer.append(std::string(2 << 20, 'x'));  // past the block size: written through
    EXPECT_FALSE(fs::exists(file));
    writer.commit();
  }
  EXPECT_EQ(fs::file_size(file), 9u + (2u << 20));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  fs::remove_all(dir);
}

TEST(ResultWriter, EarlyWritebackWritesTheSameBytes) {
  fs::path dir = temp_dir();
  fs::path file = dir / "lines.ndjson";
  std::string expected;
  {
    AtomicFileWriter writer(file);
    writer.write_back_as_written();
    for (int i = 0; i < 3000; ++i) {  // ~3 MB in lines: several 1 MiB blocks, then a tail at commit
      const std::string line =
          "{\"line\": " + std::to_string(i) + ", \"pad\": \"" + std::string(1000, 'a' + i % 26) + "\"}\n";
      writer.append(line);
      expected += line;
    }
    writer.append(std::string(2 << 20, 'y'));  // and one large piece
    expected += std::string(2 << 20, 'y');
    writer.commit();
  }
  std::ifstream in(file, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  fs::remove_all(dir);
}

TEST(ResultWriter, FlushWritesSmallAppendsToTheTemporaryFile) {
  fs::path dir = temp_dir();
  {
    AtomicFileWriter writer(dir / "lines.ndjson");
    writer.append("{\"a\": 1}\n");
    EXPECT_EQ(fs::file_size(writer.temp_path()), 0u);  // held back: below the block size
    writer.flush();
    EXPECT_EQ(fs::file_size(writer.temp_path()), 9u);
    writer.flush();  // nothing held: writes nothing more
    writer.append("{\"b\": 2}\n");
    writer.commit();
  }
  EXPECT_EQ(fs::file_size(dir / "lines.ndjson"), 18u);
  fs::remove_all(dir);
}

TEST(ResultWriter, StreamedFileWithoutCommitLeavesNothing) {
  fs::path dir = temp_dir();
  {
    AtomicFileWriter writer(dir / "lines.ndjson");
    writer.append(std::string(3 << 20, 'x'));
    EXPECT_TRUE(fs::exists(writer.temp_path()));
  }  // an error path: the writer goes out of scope uncommitted
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 0);
  fs::remove_all(dir);
}

// `--out /dev/null` or a FIFO: written in place, never replaced by a
// regular file (as root, the rename used to turn /dev/null into one).
TEST(ResultWriter, DevicesAndPipesAreWrittenInPlace) {
  write_file_atomic("/dev/null", "discarded\n");
  AtomicFileWriter null_writer("/dev/null");
  null_writer.append("discarded too");
  null_writer.commit();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is no longer a character device";

  const fs::path dir = temp_dir();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  write_file_atomic(fifo.string(), "through the pipe\n");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1) << "a temporary file was left";
  fs::remove_all(dir);
}

TEST(ResultWriter, NewDocumentCarriesContractFields) {
  char arg0[] = "tailscope-test";
  char arg1[] = "--flag";
  char* argv[] = {arg0, arg1};
  nlohmann::json doc = new_result_document("tailscope-test", 2, argv);
  EXPECT_EQ(doc["schema"], kResultSchema);
  EXPECT_EQ(doc["engine"], "tailscope-test");
  EXPECT_EQ(doc["command_line"].size(), 2u);
  EXPECT_FALSE(doc["machine"]["kernel"].get<std::string>().empty());
  EXPECT_GE(doc["machine"]["online_cpus"].get<int>(), 1);
  EXPECT_TRUE(doc["measurements"].is_array());
  EXPECT_TRUE(doc["unavailable"].is_array());
}

}  // namespace
}  // namespace tailscope
