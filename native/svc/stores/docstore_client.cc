#include "svc/stores/docstore_client.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/clock.h"
#include "svc/stores/reconnect_backoff.h"

namespace tailscope::svc::stores {
namespace {

// Waits until fd is ready for `events` or the deadline passes; false on timeout or error.
bool wait_fd(int fd, short events, int64_t deadline_ns) {
  for (;;) {
    const int64_t left_ns = deadline_ns - monotonic_ns();
    if (left_ns <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left_ns / 1'000'000)));
    if (n > 0) return (p.revents & (POLLERR | POLLNVAL)) == 0 || (p.revents & events) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

std::string first_line(const char* message) {
  std::string s = message ? message : "";
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// The connection parameters both clients use: the address as a numeric
// host, our database and role, no TLS or GSS negotiation (a loopback or
// lab-network server of the run's own, trusting its clients; a GSS attempt
// could also look up Kerberos credentials, which an event loop must not wait for).
struct DocstoreConninfo {
  explicit DocstoreConninfo(const StoreAddress& address) : host(address.host), port(std::to_string(address.port)) {
    keys = {"hostaddr", "port", "dbname", "user", "application_name", "sslmode", "gssencmode", nullptr};
    values = {host.c_str(),    port.c_str(), kDocstoreDatabase, kDocstoreUser,
              "tailscope-svc", "disable",    "disable",         nullptr};
  }
  std::string host, port;
  std::vector<const char*> keys, values;
};

// The ids of a document's `followers` array (a social_graph document); none
// when the document has no such array.
std::vector<int64_t> followers_of(const char* doc) {
  std::vector<int64_t> ids;
  const nlohmann::json j = nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("followers") || !j["followers"].is_array()) return ids;
  ids.reserve(j["followers"].size());
  for (const auto& id : j["followers"])
    if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
  return ids;
}

// Folds one result of an op into its outcome, the same for both clients: a
// find with no row is a miss, an error result makes it unavailable; with
// read_ids, a find's first document gives its followers.
void fold_docstore_result(StoreVerb op, bool read_ids, const PGresult* res, StoreResult& out) {
  const ExecStatusType s = PQresultStatus(res);
  if (s == PGRES_TUPLES_OK && op == StoreVerb::kFind && PQntuples(res) == 0) out.status = StoreStatus::kMiss;
  if (s == PGRES_TUPLES_OK && op == StoreVerb::kFind && read_ids && PQntuples(res) > 0)
    out.ids = followers_of(PQgetvalue(res, 0, 0));
  if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK)
    out = {StoreStatus::kUnavailable, first_line(PQresultErrorMessage(res))};
}

class LibpqConnection final : public BlockingStoreConnection {
 public:
  LibpqConnection(const StoreAddress& address, int64_t timeout_ns) : timeout_ns_(timeout_ns) { connect(address); }
  ~LibpqConnection() override {
    if (conn_) PQfinish(conn_);
  }

  StoreResult run(const StoreRequest& r) override;
  bool broken() const override { return broken_; }

 private:
  void connect(const StoreAddress& address) {
    const DocstoreConninfo info(address);
    conn_ = PQconnectStartParams(info.keys.data(), info.values.data(), 0);
    const int64_t deadline_ns = monotonic_ns() + timeout_ns_;
    if (!conn_ || PQstatus(conn_) == CONNECTION_BAD) return fail("cannot start a connection");
    // PQconnectPoll's handshake, each step waited for with the deadline (connect_timeout is whole seconds, ≥ 2).
    for (PostgresPollingStatusType s = PGRES_POLLING_WRITING;;) {
      if (s == PGRES_POLLING_OK) break;
      if (s == PGRES_POLLING_FAILED) return fail(first_line(PQerrorMessage(conn_)));
      if (!wait_fd(PQsocket(conn_), s == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline_ns))
        return fail("connect timed out");
      s = PQconnectPoll(conn_);
    }
    if (PQsetnonblocking(conn_, 1) != 0) return fail("cannot set non-blocking");
  }
  void fail(std::string why) {
    broken_ = true;
    error_ = std::move(why);
  }
  StoreResult unavailable(std::string why) {
    // A timed-out query may still answer later: the connection is out of step, so the pool drops it.
    fail(std::move(why));
    return {StoreStatus::kUnavailable, error_};
  }
  PGconn* conn_ = nullptr;
  int64_t timeout_ns_;
  bool broken_ = false;
  std::string error_;
};

StoreResult LibpqConnection::run(const StoreRequest& r) {
  if (broken_) return {StoreStatus::kUnavailable, error_};
  const DocstoreStatement st = docstore_statement(r);
  if (st.sql.empty())
    return {StoreStatus::kUnavailable, std::string("document store has no op ") + store_verb_name(r.op)};
  const int64_t deadline_ns = monotonic_ns() + timeout_ns_;
  std::vector<const char*> params;
  for (const auto& p : st.params) params.push_back(p.c_str());
  if (!PQsendQueryParams(conn_, st.sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                         nullptr, 0))
    return unavailable(first_line(PQerrorMessage(conn_)));
  for (int f; (f = PQflush(conn_)) != 0;) {  // 1: more to send
    if (f < 0 || !wait_fd(PQsocket(conn_), POLLOUT, deadline_ns)) return unavailable("send timed out or failed");
  }
  while (PQisBusy(conn_)) {
    if (!wait_fd(PQsocket(conn_), POLLIN, deadline_ns)) return unavailable("answer timed out");
    if (!PQconsumeInput(conn_)) return unavailable(first_line(PQerrorMessage(conn_)));
  }
  StoreResult out{StoreStatus::kOk, {}};
  for (PGresult* res; (res = PQgetResult(conn_)) != nullptr; PQclear(res))
    fold_docstore_result(r.op, r.read_ids, res, out);
  return out;
}

// libpq's non-blocking API on the loop: a bounded set of connections, each
// with at most one query in flight (PostgreSQL runs one query at a time per
// connection). An op takes an idle connection or waits in order for one —
// a connection is opened for it while fewer than the set's size exist —
// until its deadline. The handshake (PQconnectPoll), the send (PQflush) and
// the answer (PQconsumeInput / PQisBusy / PQgetResult) each go on when the
// loop says the socket is ready; a query past its deadline closes its
// connection (its late answer would be out of step) and fails unavailable.
class LibpqAsyncClient final : public AsyncStoreClient {
 public:
  LibpqAsyncClient(const StoreAddress& address, int64_t timeout_ns, const std::vector<LoopRegistration*>& regs)
      : address_(address), timeout_ns_(timeout_ns) {
    for (LoopRegistration* r : regs) slots_.push_back(Slot{r});
  }
  ~LibpqAsyncClient() override { close("store client closed"); }

  void run(const StoreRequest& r, int64_t deadline_ns, StoreDone done) override {
    DocstoreStatement st = docstore_statement(r);
    if (st.sql.empty()) return done(unavailable(std::string("document store has no op ") + store_verb_name(r.op)));
    waiting_.push_back(Op{r.op, r.read_ids, std::move(st), deadline_ns, std::move(done)});
    dispatch(monotonic_ns());
  }

  void on_ready(size_t sub, uint32_t ready) override {
    if (sub >= slots_.size()) return;
    Slot& s = slots_[sub];
    switch (s.state) {
      case State::kConnecting:
        advance_connect(s);
        break;
      case State::kBusy:
        if (ready & net::kWritable) flush(s);
        if (s.state == State::kBusy && (ready & (net::kReadable | net::kHangup))) read_answer(s);
        break;
      case State::kIdle:
        // Nothing is expected: a closed or dead server (EOF), or a notice.
        if (!PQconsumeInput(s.conn) || PQstatus(s.conn) == CONNECTION_BAD) close_slot(s);
        break;
      case State::kClosed:
        break;
    }
    dispatch(monotonic_ns());
  }

  int64_t service(int64_t now_ns) override {
    for (Slot& s : slots_) {
      if (s.state == State::kBusy && s.op->deadline_ns <= now_ns) {
        fail_slot(s, "no answer within the store timeout");
      } else if (s.state == State::kConnecting && s.connect_deadline_ns <= now_ns) {
        backoff_.failed(now_ns, "connect timed out");
        close_slot(s);
      }
    }
    const bool connecting =
        std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.state == State::kConnecting; });
    while (!waiting_.empty() && waiting_.front().deadline_ns <= now_ns) {
      Op op = std::move(waiting_.front());
      waiting_.pop_front();
      op.done(unavailable(connecting ? "connect timed out (no answer to the handshake within the store timeout)"
                                     : "no document-store connection free within the store timeout"));
    }
    dispatch(now_ns);
    int64_t due_ns = waiting_.empty() ? INT64_MAX : waiting_.front().deadline_ns;
    for (const Slot& s : slots_) {
      if (s.state == State::kBusy) due_ns = std::min(due_ns, s.op->deadline_ns);
      if (s.state == State::kConnecting) due_ns = std::min(due_ns, s.connect_deadline_ns);
    }
    return due_ns;
  }

  void close(const std::string& why) override {
    for (Slot& s : slots_) {
      if (s.state == State::kBusy)
        fail_slot(s, why);
      else
        close_slot(s);
    }
    fail_waiting(why);
  }

 private:
  enum class State { kClosed, kConnecting, kIdle, kBusy };
  struct Op {
    StoreVerb verb;
    bool read_ids;
    DocstoreStatement statement;
    int64_t deadline_ns;
    StoreDone done;
  };
  struct Slot {
    LoopRegistration* reg;
    PGconn* conn = nullptr;
    State state = State::kClosed;
    int64_t connect_deadline_ns = 0;
    std::optional<Op> op{};  // kBusy
    StoreResult result{};    // kBusy: folded from its results so far
  };

  // Idle connections take the oldest ops; more open while ops wait beyond
  // those already opening; with none open or opening and reconnects backing
  // off, the waiting ops fail now rather than at their deadline.
  void dispatch(int64_t now_ns) {
    for (Slot& s : slots_) {
      if (waiting_.empty()) return;
      if (s.state == State::kIdle) {
        send(s, std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    if (waiting_.empty()) return;
    size_t opening = 0, open = 0;
    for (const Slot& s : slots_) {
      opening += s.state == State::kConnecting;
      open += s.state != State::kClosed;
    }
    bool tried = false;
    for (Slot& s : slots_) {
      if (waiting_.size() <= opening || !backoff_.may_connect(now_ns)) break;
      if (s.state != State::kClosed) continue;
      tried = true;
      if (connect(s, now_ns)) {
        ++opening;
        ++open;
      }
    }
    if (open == 0) fail_waiting(tried ? backoff_.last_failure() : backoff_.backing_off());
  }

  bool connect(Slot& s, int64_t now_ns) {
    const DocstoreConninfo info(address_);
    s.conn = PQconnectStartParams(info.keys.data(), info.values.data(), 0);  // non-blocking: no DNS, a numeric host
    if (!s.conn || PQstatus(s.conn) == CONNECTION_BAD || PQsocket(s.conn) < 0) {
      backoff_.failed(now_ns, s.conn ? first_line(PQerrorMessage(s.conn)) : "cannot allocate a libpq connection");
      if (s.conn) PQfinish(s.conn);
      s.conn = nullptr;
      return false;
    }
    s.state = State::kConnecting;
    s.connect_deadline_ns = now_ns + timeout_ns_;
    s.reg->attach(PQsocket(s.conn), net::kWritable);  // PQconnectPoll starts as if it had said "writing"
    return true;
  }

  void advance_connect(Slot& s) {
    const PostgresPollingStatusType p = PQconnectPoll(s.conn);
    if (p == PGRES_POLLING_FAILED) {
      backoff_.failed(monotonic_ns(), first_line(PQerrorMessage(s.conn)));
      return close_slot(s);
    }
    // libpq may have replaced its socket (a retry of the handshake): register the new one.
    if (PQsocket(s.conn) != s.reg->fd()) s.reg->attach(PQsocket(s.conn), 0);
    if (p == PGRES_POLLING_OK) {
      if (PQsetnonblocking(s.conn, 1) != 0) {
        // A connection the loop cannot drive is a failed connect: backing off keeps dispatch() from
        // reopening it at once, over and over.
        backoff_.failed(monotonic_ns(), "cannot set the connection non-blocking");
        return close_slot(s);
      }
      backoff_.connected();
      s.state = State::kIdle;
      s.reg->want(net::kReadable);  // an idle connection still hears its server die
      return;
    }
    s.reg->want(p == PGRES_POLLING_READING ? net::kReadable : net::kWritable);
  }

  void send(Slot& s, Op op) {
    s.op = std::move(op);
    std::vector<const char*> params;  // into the slot's own copy (a moved short string moves its bytes)
    for (const auto& p : s.op->statement.params) params.push_back(p.c_str());
    s.result = {StoreStatus::kOk, {}};
    s.state = State::kBusy;
    if (!PQsendQueryParams(s.conn, s.op->statement.sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(),
                           nullptr, nullptr, 0))
      return fail_slot(s, first_line(PQerrorMessage(s.conn)));
    flush(s);
  }

  void flush(Slot& s) {
    const int f = PQflush(s.conn);  // 0: all sent, 1: more to send when writable
    if (f < 0) return fail_slot(s, first_line(PQerrorMessage(s.conn)));
    s.reg->want(net::kReadable | (f == 1 ? net::kWritable : 0u));
  }

  void read_answer(Slot& s) {
    if (!PQconsumeInput(s.conn)) return fail_slot(s, first_line(PQerrorMessage(s.conn)));
    while (!PQisBusy(s.conn)) {
      PGresult* res = PQgetResult(s.conn);
      if (!res) {  // the op's last result: the connection is free again
        Op op = std::move(*s.op);
        s.op.reset();
        s.state = State::kIdle;
        op.done(s.result);
        return;
      }
      fold_docstore_result(s.op->verb, s.op->read_ids, res, s.result);
      PQclear(res);
    }
  }

  // Fails the slot's op and closes it: a late answer would be out of step.
  void fail_slot(Slot& s, const std::string& why) {
    std::optional<Op> op = std::move(s.op);
    s.op.reset();
    close_slot(s);
    if (op) op->done(unavailable(why));
  }

  void close_slot(Slot& s) {
    s.reg->detach();  // before PQfinish closes the descriptor
    if (s.conn) PQfinish(s.conn);
    s.conn = nullptr;
    s.state = State::kClosed;
  }

  void fail_waiting(const std::string& why) {
    std::deque<Op> failed;
    failed.swap(waiting_);
    for (Op& op : failed) op.done(unavailable(why));
  }

  StoreAddress address_;
  int64_t timeout_ns_;
  std::vector<Slot> slots_;
  std::deque<Op> waiting_;
  ReconnectBackoff backoff_{"document store"};
};

}  // namespace

DocstoreStatement docstore_statement(const StoreRequest& r) {
  const std::string& c = r.collection;
  std::string doc;
  if (store_verb_writes(r.op)) {
    // A JSON document of about value_bytes: the key and a filler string.
    doc = R"({"key":")" + r.key + R"(","payload":")" + store_payload(r.value_bytes) + "\"}";
  }
  switch (r.op) {
    case StoreVerb::kFind:
      return {"SELECT doc FROM " + c + " WHERE key = $1 LIMIT " + std::to_string(r.limit), {r.key}};
    case StoreVerb::kInsert:
      return {"INSERT INTO " + c + " (key, doc) VALUES ($1, $2::jsonb)", {r.key, doc}};
    case StoreVerb::kUpdate:
      // MongoDB's update with upsert, in one statement: replace the document, or insert it when there is none.
      return {"WITH u AS (UPDATE " + c + " SET doc = $2::jsonb WHERE key = $1 RETURNING 1) INSERT INTO " + c +
                  " (key, doc) SELECT $1, $2::jsonb WHERE NOT EXISTS (SELECT 1 FROM u)",
              {r.key, doc}};
    default:
      return {};
  }
}

std::string docstore_create_sql(const std::string& collection) {
  return "CREATE TABLE IF NOT EXISTS " + collection +
         " (id bigserial PRIMARY KEY, key text NOT NULL, doc jsonb NOT NULL); CREATE INDEX IF NOT EXISTS " +
         collection + "_key ON " + collection + " (key)";
}

std::unique_ptr<BlockingStoreConnection> connect_docstore_blocking(const StoreAddress& address, int64_t timeout_ns) {
  return std::make_unique<LibpqConnection>(address, timeout_ns);
}

std::unique_ptr<AsyncStoreClient> make_docstore_async(const StoreAddress& address, int64_t timeout_ns,
                                                      const std::vector<LoopRegistration*>& regs) {
  return std::make_unique<LibpqAsyncClient>(address, timeout_ns, regs);
}

}  // namespace tailscope::svc::stores
