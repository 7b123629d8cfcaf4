#include "svc/stores/store_servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/affinity.h"
#include "core/clock.h"
#include "net/socket.h"
#include "prof/placement.h"
#include "svc/netns.h"
#include "svc/stores/docstore_client.h"
#include "svc/stores/social_graph.h"
#include "svc/stores/store_set.h"

namespace tailscope::svc::stores {
namespace {

constexpr const char* kPostgresBin = "/usr/lib/postgresql/15/bin";
constexpr int64_t kStopGraceNs = 5'000'000'000;

std::string postgres_binary(const char* name) { return std::string(kPostgresBin) + "/" + name; }

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::optional<std::string> on_path(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin"})
    if (executable(std::string(dir) + "/" + name)) return std::string(dir) + "/" + name;
  return std::nullopt;
}

// A free port on host: bound once and released (the server binds it next; a
// port taken in between makes that start fail, and start_store_server tries another).
int free_port(const std::string& host) {
  const int fd = net::make_listener(host, 0);
  const int port = net::bound_port(fd);
  ::close(fd);
  return port;
}

bool accepts(const StoreAddress& a) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  ::inet_pton(AF_INET, a.host.c_str(), &sa.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i) out += " | " + lines[i];
  return out;
}

// Who the document store runs as: PostgreSQL refuses to run as root.
struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};
// memcached refuses root too; its own -u would change the credentials after
// exec, which clears PR_SET_PDEATHSIG — so the child drops them itself, before arming it.
RunAs unprivileged_user(const char* name, const std::string& what) {
  RunAs r;
  if (::geteuid() != 0) return r;
  const passwd* pw = ::getpwnam(name);
  if (!pw) throw std::runtime_error(what + ": running as root needs the '" + std::string(name) + "' system user");
  r = {true, pw->pw_uid, pw->pw_gid};
  return r;
}

// Ready: memcached and Redis once they accept; PostgreSQL once it answers a
// ping as accepting (it accepts TCP while it is still starting up).
bool ready(StoreSystem system, const StoreAddress& a) {
  if (system != StoreSystem::kMongodb) return accepts(a);
  const std::string port = std::to_string(a.port);
  const char* keys[] = {"host", "port", "dbname", "user", "connect_timeout", nullptr};
  const char* values[] = {a.host.c_str(), port.c_str(), "postgres", kDocstoreUser, "2", nullptr};
  return PQpingParams(keys, values, 0) == PQPING_OK;
}

// Forks and execs argv with stdout/stderr to log, in its own process group,
// pinned to cpus, as run_as; the child dies with this process (PDEATHSIG,
// set after the credentials change, which would clear it).
pid_t spawn(const std::vector<std::string>& args, const std::string& log, const std::vector<int>& cpus,
            const RunAs& run_as, int netns_fd = -1, const std::string& stdin_path = "/dev/null") {
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
  }
  const int in = ::open(stdin_path.c_str(), O_RDONLY);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
  if (!cpus.empty() && prof::set_process_affinity(cpus) != 0) _exit(125);
  // Into the store's lab host (setns needs the privileges dropped below): it binds that host's address.
  if (!enter_netns(netns_fd)) _exit(124);
  if (run_as.drop && (::setgid(run_as.gid) != 0 || ::setuid(run_as.uid) != 0)) _exit(126);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(0);  // the parent died before PDEATHSIG was armed
  ::execv(argv[0], argv.data());
  _exit(127);
}

// "memcached 1.6.18", "redis 7.0.15" from the binary's own version line; `fallback` when it cannot be read.
std::string server_version(const std::string& binary, const char* flag, const std::string& name,
                           const std::string& marker, const std::string& fallback) {
  const std::string command = binary + " " + flag + " 2>/dev/null";
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return fallback;
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  ::pclose(p);
  const std::string line = got ? buf : "";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return fallback;
  const size_t begin = at + marker.size();
  const size_t end = line.find_first_not_of("0123456789.", begin);
  const std::string version = line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  return version.empty() ? fallback : name + " " + version;
}

// Runs a short command (initdb) to completion; throws with its log on failure.
void run_to_completion(const std::vector<std::string>& args, const std::string& log, const RunAs& run_as,
                       const std::string& what, const std::string& stdin_path = "/dev/null") {
  const pid_t pid = spawn(args, log, {}, run_as, -1, stdin_path);
  if (pid < 0) throw std::runtime_error(what + ": fork failed");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(what + " failed (status " + std::to_string(status) + ")" + log_tail(log));
}

// Lets other users pass through (not list) each directory above `dir` that
// this process owns (mkdtemp makes them 0700).
void allow_traversal(const std::string& dir) {
  for (std::filesystem::path p = dir; p.has_relative_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && st.st_uid == ::geteuid() && !(st.st_mode & S_IXOTH))
      ::chmod(p.c_str(), (st.st_mode & 07777) | S_IXOTH);
  }
}

void make_dir_for(const std::string& dir, const RunAs& run_as) {
  std::filesystem::create_directories(dir);
  if (run_as.drop && ::chown(dir.c_str(), run_as.uid, run_as.gid) != 0)
    throw std::runtime_error("cannot give " + dir + " to the postgres user: " + std::strerror(errno));
  ::chmod(dir.c_str(), 0700);
}

struct ProcStat {
  pid_t ppid = 0;
  pid_t pgrp = 0;
  int64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
};
std::optional<ProcStat> read_stat(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream f(text.substr(close + 2));
  std::vector<std::string> v;
  for (std::string w; f >> w;) v.push_back(w);
  // After "(comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
  if (v.size() < 15) return std::nullopt;
  ProcStat s;
  s.ppid = std::stoi(v[1]);
  s.pgrp = std::stoi(v[2]);
  s.utime = std::stoll(v[11]);
  s.stime = std::stoll(v[12]);
  s.cutime = std::stoll(v[13]);
  s.cstime = std::stoll(v[14]);
  return s;
}

void remove_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// The PostgreSQL data-dir template. initdb writes ~40 MB and, with the clients'
// database, took most of a graph start; a copy of a data dir made once takes a
// small fraction of that (docs/stores.md has the figures). Bumped whenever initdb's arguments change,
// so an older template is never used.
constexpr int kDocstoreTemplateFormat = 2;  // 2: the clients' database made in the data dir

std::string docstore_template_path(const std::string& root, const RunAs& run_as, int format = kDocstoreTemplateFormat) {
  const uid_t owner = run_as.drop ? run_as.uid : ::geteuid();
  return root + "/docstore-pg15-v" + std::to_string(format) + "-uid" + std::to_string(owner);
}

// cp -a: keeps the modes (postgres refuses a data dir readable by others) and, run
// as root, the postgres user's ownership. False (with its message in the log) on failure.
bool copy_tree(const std::string& from, const std::string& to, const std::string& log) {
  const pid_t pid = spawn({"/bin/cp", "-a", from, to}, log, {}, RunAs{});
  if (pid < 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// initdb, then the clients' database made by a single-user backend (no server,
// no port): the data dir then needs nothing more before the server serves it,
// and a template copied from it carries the database too. CREATE DATABASE on a
// running server took ~0.6 s of every start here, and the shutdown checkpoint it
// leaves behind another ~2.5 s.
void make_docstore_data_dir(const std::string& dir, const RunAs& run_as, const std::string& log) {
  run_to_completion({postgres_binary("initdb"), "-D", dir + "/data", "-U", kDocstoreUser, "--auth=trust", "-E", "UTF8",
                     "--no-sync", "--no-instructions"},
                    log, run_as, "mongodb (PostgreSQL) initdb");
  const std::string sql = dir + "/create-database.sql";
  {
    std::ofstream f(sql);
    f << "CREATE DATABASE " << kDocstoreDatabase << ";\n";
    if (!f) throw std::runtime_error("mongodb (PostgreSQL): cannot write " + sql);
  }
  run_to_completion({postgres_binary("postgres"), "--single", "-D", dir + "/data", "postgres"}, log, run_as,
                    "mongodb (PostgreSQL) CREATE DATABASE (single-user)", sql);
  std::filesystem::remove(sql);
}

// Copies the template into `data` when there is one; false when there is none
// (or it could not be copied: a damaged template is removed and made again).
bool data_dir_from_template(const std::string& root, const RunAs& run_as, const std::string& data,
                            const std::string& log) {
  if (root.empty()) return false;
  const std::string tpl = docstore_template_path(root, run_as);
  std::error_code ec;
  if (!std::filesystem::exists(tpl + "/PG_VERSION", ec)) return false;
  if (copy_tree(tpl, data, log)) return true;
  std::filesystem::remove_all(data, ec);
  std::filesystem::remove_all(tpl, ec);
  return false;
}

// Keeps a copy of a fresh initdb's data dir as the template. A copy is made
// under a name of its own and renamed into place, so two runs starting at once
// never see half a template (the loser's copy is dropped). Best effort: a run
// that cannot keep a template (a read-only cache) still runs, from its own initdb.
void keep_as_template(const std::string& root, const RunAs& run_as, const std::string& data, const std::string& log) {
  if (root.empty()) return;
  const std::string tpl = docstore_template_path(root, run_as);
  const std::string partial = tpl + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(monotonic_ns());
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return;
  if (copy_tree(data, partial, log) && ::rename(partial.c_str(), tpl.c_str()) == 0) {
    // The older formats' templates of the same owner are never used again (~40 MB each).
    for (int format = 1; format < kDocstoreTemplateFormat; ++format)
      std::filesystem::remove_all(docstore_template_path(root, run_as, format), ec);
    return;
  }
  std::filesystem::remove_all(partial, ec);
}

// A JSON string of `bytes` filler characters (no escaping needed).
std::string filler(size_t bytes) { return std::string(bytes, 'x'); }

void exec_sql(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType s = PQresultStatus(r);
  const std::string error = PQresultErrorMessage(r);
  PQclear(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
    throw std::runtime_error("mongodb (PostgreSQL) preload: " + error + " in: " + sql.substr(0, 120));
}

}  // namespace

std::string default_template_dir() {
  if (const char* c = std::getenv("TAILSCOPE_CACHE"); c && *c) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tailscope";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tailscope";
  return "";
}

std::optional<std::string> find_store_binary(StoreSystem system, std::string* missing) {
  switch (system) {
    case StoreSystem::kMemcached:
      if (auto p = on_path("memcached")) return p;
      *missing = "memcached: /usr/bin/memcached not found (install the Debian package memcached)";
      return std::nullopt;
    case StoreSystem::kRedis:
      if (auto p = on_path("redis-server")) return p;
      *missing = "redis: redis-server not found (install the Debian package redis-server)";
      return std::nullopt;
    case StoreSystem::kMongodb:
      if (executable(postgres_binary("postgres")) && executable(postgres_binary("initdb")))
        return postgres_binary("postgres");
      *missing = std::string("mongodb role (PostgreSQL 15): ") + kPostgresBin +
                 "/postgres not found (install the Debian package postgresql)";
      return std::nullopt;
    case StoreSystem::kNone:
      break;
  }
  *missing = "no such store system";
  return std::nullopt;
}

namespace {

// The server could not bind the port free_port() found: something took it in between
// (another server starting, an outgoing connection's ephemeral port). Worth another port.
struct PortTaken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How many ports a start tries before the last one's error is the caller's.
constexpr int kStartAttempts = 4;

StoreServer start_store_server_once(const StoreServerOptions& o) {
  std::string missing;
  const auto binary = find_store_binary(o.system, &missing);
  if (!binary) throw std::runtime_error(missing);
  std::vector<int> cpus;
  if (!o.cpus.empty()) {
    cpus = parse_cpu_list(o.cpus);
    prof::check_cpus_allowed(cpus, allowed_cpus(), std::string(system_name(o.system)) + " cpus " + o.cpus);
  }
  StoreServer s;
  s.system = o.system;
  s.cpus = o.cpus;
  s.memory_mib = o.memory_mib;
  // The host's address exists only inside its namespace: the free port is found there.
  s.address = {o.host, in_netns(o.netns_fd, o.netns, [&] { return free_port(o.host); })};
  s.dir = o.scratch_dir + "/" + system_name(o.system);
  const std::string log = s.dir + "/server.log";  // inside the data dir: removed with it
  const std::string port = std::to_string(s.address.port);
  const std::string memory = std::to_string(o.memory_mib);
  RunAs run_as;
  std::vector<std::string> args;
  try {
    switch (o.system) {
      case StoreSystem::kMemcached:
        std::filesystem::create_directories(s.dir);
        // -U 0: no UDP; -t 1: one worker thread (its CPU is the graph's to place); -m: the memory cap.
        args = {*binary, "-l", o.host, "-p", port, "-U", "0", "-t", "1", "-m", memory, "-c", "4096"};
        run_as = unprivileged_user("nobody", "memcached");
        s.server = server_version(*binary, "-V", "memcached", "memcached ", "memcached");
        break;
      case StoreSystem::kRedis:
        std::filesystem::create_directories(s.dir);
        // No persistence (--save '', no AOF): the data is discarded after the run, as DeathStarBench's is.
        args = {*binary, "--bind", o.host, "--port", port, "--save", "", "--appendonly", "no", "--maxmemory",
                memory + "mb", "--maxmemory-policy", "allkeys-lru", "--protected-mode",
                // Protected mode accepts only loopback clients without a password. On a lab host the
                // server binds the host's lab-range address inside its namespace, reachable only over
                // this machine's lab bridge, and the graph's services call it from the other hosts.
                o.netns_fd >= 0 ? "no" : "yes", "--dir", s.dir, "--daemonize", "no"};
        s.server = server_version(*binary, "--version", "redis", "v=", "redis");
        break;
      case StoreSystem::kMongodb: {
        run_as = unprivileged_user("postgres", "mongodb (PostgreSQL)");
        make_dir_for(s.dir, run_as);
        allow_traversal(o.scratch_dir);  // the postgres user must reach its data dir
        {
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT, 0644);
          if (fd >= 0) {
            // The log is written by postgres and initdb, which run as the postgres user.
            if (run_as.drop && ::fchown(fd, run_as.uid, run_as.gid) != 0) ::unlink(log.c_str());
            ::close(fd);
          }
        }
        if (!data_dir_from_template(o.template_dir, run_as, s.dir + "/data", log)) {
          make_docstore_data_dir(s.dir, run_as, log);
          keep_as_template(o.template_dir, run_as, s.dir + "/data", log);  // before this run's own changes below
        }
        if (o.netns_fd >= 0) {
          // initdb's pg_hba.conf admits TCP from loopback only; on a lab host the graph's services
          // connect from the other hosts' lab-range addresses (and the preload from the bridge's).
          std::ofstream hba(s.dir + "/data/pg_hba.conf", std::ios::app);
          hba << "host all all 198.18.0.0/15 trust\n";
          if (!hba) throw std::runtime_error("mongodb (PostgreSQL): cannot add the lab range to pg_hba.conf");
        }
        // synchronous_commit=off: a write is acknowledged before its WAL is flushed (the
        // flush follows within wal_writer_delay), as MongoDB's default write concern
        // acknowledges before its journal commit; fsync stays on. docs/stores.md.
        args = {*binary,
                "-D",
                s.dir + "/data",
                "-h",
                o.host,
                "-p",
                port,
                "-k",
                s.dir,
                "-c",
                "shared_buffers=" + memory + "MB",
                "-c",
                "max_connections=400",
                "-c",
                "synchronous_commit=off",
                "-c",
                "fsync=on",
                "-c",
                "logging_collector=off"};
        s.server = "postgresql 15";
        break;
      }
      case StoreSystem::kNone:
        throw std::runtime_error("no such store system");
    }
  } catch (...) {
    remove_dir(s.dir);
    throw;
  }
  s.settings = args;
  s.pid = spawn(args, log, cpus, run_as, o.netns_fd);
  if (s.pid < 0) {
    remove_dir(s.dir);
    throw std::runtime_error(std::string(system_name(o.system)) + ": fork failed");
  }
  const int64_t deadline = monotonic_ns() + o.start_timeout_ns;
  while (!ready(o.system, s.address)) {
    int status = 0;
    const bool died = ::waitpid(s.pid, &status, WNOHANG) == s.pid;
    if (died || monotonic_ns() > deadline) {
      if (died) s.pid = -1;
      const std::string tail = log_tail(log);
      stop_store_server(s);
      const std::string what = std::string(system_name(o.system)) +
                               (died ? " exited while starting" : " did not accept connections in time") + " on " +
                               o.host + ":" + port + " (a port taken?)" + tail;
      // strerror(EADDRINUSE), as memcached, redis and postgres all log it.
      if (died && tail.find("Address already in use") != std::string::npos) throw PortTaken(what);
      throw std::runtime_error(what);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return s;
}

}  // namespace

StoreServer start_store_server(const StoreServerOptions& o) {
  for (int attempt = 1;; ++attempt) {
    try {
      return start_store_server_once(o);
    } catch (const PortTaken& e) {
      if (attempt == kStartAttempts)
        throw std::runtime_error(std::string(e.what()) + " | the port was taken on each of " +
                                 std::to_string(kStartAttempts) + " attempts");
    }
  }
}

bool store_server_alive(const StoreServer& s) {
  if (s.pid <= 0) return false;
  int status = 0;
  // Our child: a zombie has exited (waitpid reaps it here; stop_store_server then finds it gone).
  return ::waitpid(s.pid, &status, WNOHANG) == 0;
}

std::optional<double> store_server_cpu_s(const StoreServer& s) {
  if (s.pid <= 0) return std::nullopt;
  const auto leader = read_stat("/proc/" + std::to_string(s.pid) + "/stat");
  if (!leader) return std::nullopt;
  int64_t ticks = leader->cutime + leader->cstime;  // reaped children (postgres backends that ended)
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const auto st = read_stat(e.path().string() + "/stat");
    // PostgreSQL's backends call setsid(): a live one has a process group of its own and is found by its parent.
    if (st && (st->pgrp == s.pid || st->ppid == s.pid)) ticks += st->utime + st->stime;
  }
  return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::optional<int64_t> store_server_max_rss_kib(const StoreServer& s) {
  std::ifstream in("/proc/" + std::to_string(s.pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return std::nullopt;
}

std::optional<int> stop_store_server(StoreServer& s) {
  std::optional<int> died_by_itself;
  if (s.pid > 0) {
    int status = 0;
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
      died_by_itself = status;  // it had exited before it was asked to stop
      s.pid = -1;
    }
  }
  if (s.pid > 0) {
    // postgres: SIGQUIT is its immediate shutdown. Its data dir is deleted next, so the shutdown
    // checkpoint of a fast shutdown (SIGINT; ~2.5 s here) would only write pages about to be removed.
    const int stop_signal = s.system == StoreSystem::kMongodb ? SIGQUIT : SIGTERM;
    ::kill(s.pid, stop_signal);
    const int64_t kill_at = monotonic_ns() + kStopGraceNs;
    bool escalated = false;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(s.pid, &status, WNOHANG);
      // Ended by a signal that was not ours: it was dying already (a SIGKILL whose exit had not
      // finished, so it was not yet reapable when the caller last looked).
      if (r == s.pid && WIFSIGNALED(status) && WTERMSIG(status) != stop_signal && !escalated) died_by_itself = status;
      if (r == s.pid || (r < 0 && errno == ECHILD)) break;
      if (monotonic_ns() > kill_at) {
        ::kill(-s.pid, SIGKILL);
        escalated = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-s.pid, SIGKILL);  // anything of its group still alive (postgres workers)
    s.pid = -1;
  }
  remove_dir(s.dir);
  s.dir.clear();
  return died_by_itself;
}

void preload_docstore(const StoreAddress& address, const std::vector<std::string>& collections) {
  const std::string conninfo = "host=" + address.host + " port=" + std::to_string(address.port) +
                               " user=" + kDocstoreUser + " dbname=" + kDocstoreDatabase + " connect_timeout=10";
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    const std::string e = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("mongodb (PostgreSQL) preload: cannot connect: " + e);
  }
  try {
    std::set<std::string> all(collections.begin(), collections.end());
    all.insert({"users", "social_graph", "hotels_profile", "hotels_rate", "reservations"});
    for (const auto& name : all) exec_sql(c, docstore_create_sql(name));
    // Users 0 … 961: DeathStarBench's register_user documents.
    exec_sql(c,
             "INSERT INTO users (key, doc) SELECT 'user:' || i, jsonb_build_object('user_id', i, 'username', "
             "'username_' || i, 'first_name', 'first_' || i, 'last_name', 'last_' || i, 'salt', md5(i::text), "
             "'password', md5('password_' || i)) FROM generate_series(0, " +
                 std::to_string(kStoreUsers - 1) + ") AS i");
    // The social graph: one document per user with its followers and followees (friendship is mutual).
    // The same graph a simulated fan-out reads its follower counts from (social_graph.h).
    const auto& adjacency = social_graph_followers();
    std::string sql = "INSERT INTO social_graph (key, doc) VALUES ";
    for (int u = 0; u < kStoreUsers; ++u) {
      std::string ids;
      for (int64_t f : adjacency[static_cast<size_t>(u)]) {
        if (!ids.empty()) ids.push_back(',');
        ids.append(std::to_string(f));
      }
      sql.append(u ? ",(" : "(");
      sql.append("'user:").append(std::to_string(u)).append("', '{\"user_id\":").append(std::to_string(u));
      sql.append(",\"followers\":[").append(ids).append("],\"followees\":[").append(ids).append("]}')");
    }
    exec_sql(c, sql);
    // Hotels 0 … 79: profile and rate rows, as hotelReservation's data loader writes.
    exec_sql(c,
             "INSERT INTO hotels_profile (key, doc) SELECT 'hotel:' || i, jsonb_build_object('id', i, 'name', "
             "'hotel_' || i, 'phone', '415-' || (1000 + i), 'description', '" +
                 filler(256) +
                 "', 'address', jsonb_build_object('lat', 37.7 + i * 0.001, 'lon', -122.4 + i * 0.001)) FROM "
                 "generate_series(0, " +
                 std::to_string(kStoreHotels - 1) + ") AS i");
    exec_sql(c,
             "INSERT INTO hotels_rate (key, doc) SELECT 'hotel:' || i, jsonb_build_object('hotel_id', i, 'code', "
             "'RACK', 'in_date', '2015-04-09', 'out_date', '2015-04-10', 'room_type', "
             "jsonb_build_object('bookable_rate', 109.0 + i, 'total_rate', 109.0 + i, 'room_description', 'King sized "
             "bed')) FROM "
             "generate_series(0, " +
                 std::to_string(kStoreHotels - 1) + ") AS i");
    exec_sql(c, "ANALYZE");
  } catch (...) {
    PQfinish(c);
    throw;
  }
  PQfinish(c);
}

}  // namespace tailscope::svc::stores
