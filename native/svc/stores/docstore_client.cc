#include "svc/stores/docstore_client.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>

#include "core/clock.h"

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
    const std::string port = std::to_string(address.port);
    const char* keys[] = {"host", "port", "dbname", "user", "application_name", nullptr};
    const char* values[] = {address.host.c_str(), port.c_str(),    kDocstoreDatabase,
                            kDocstoreUser,        "tailscope-svc", nullptr};
    conn_ = PQconnectStartParams(keys, values, 0);
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
  for (PGresult* res; (res = PQgetResult(conn_)) != nullptr; PQclear(res)) {
    const ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_TUPLES_OK && r.op == StoreVerb::kFind && PQntuples(res) == 0) out.status = StoreStatus::kMiss;
    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK)
      out = {StoreStatus::kUnavailable, first_line(PQresultErrorMessage(res))};
  }
  return out;
}

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

}  // namespace tailscope::svc::stores
