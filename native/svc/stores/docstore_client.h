// The document store: PostgreSQL 15, one JSONB table per collection, serving
// DeathStarBench's MongoDB roles (docs/stores.md says why). Spans carry
// db.system=postgresql and tailscope.store_role=mongodb.
//
// Blocking form (thread models): one libpq connection per pooled connection,
// driven through libpq's non-blocking API (PQsendQueryParams, PQflush,
// PQconsumeInput/PQisBusy) and poll() with a deadline — libpq's synchronous
// PQexec has no per-call timeout, and a hung server must not hold a thread.
// Non-blocking form (event-loop models): the same calls driven by the loop's
// readiness events, a bounded set of connections per loop, one query in
// flight on each. Both run the same statements (docstore_statement).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "svc/stores/async_store.h"
#include "svc/stores/store_client.h"

namespace tailscope::svc::stores {

std::unique_ptr<BlockingStoreConnection> connect_docstore_blocking(const StoreAddress& address, int64_t timeout_ns);
// At most regs.size() connections (one per registration), opened on demand;
// each connect ends within timeout_ns.
std::unique_ptr<AsyncStoreClient> make_docstore_async(const StoreAddress& address, int64_t timeout_ns,
                                                      const std::vector<LoopRegistration*>& regs);

// The SQL a document-store op runs, with its parameters ($1 the key, $2 the
// JSON document); the collection is a checked identifier (topology.cc).
struct DocstoreStatement {
  std::string sql;
  std::vector<std::string> params;
};
DocstoreStatement docstore_statement(const StoreRequest& request);
// CREATE TABLE IF NOT EXISTS for a collection (id, key, doc jsonb) and its key index.
std::string docstore_create_sql(const std::string& collection);
// The database and role the supervisor creates and the clients use.
inline constexpr const char* kDocstoreDatabase = "tailscope";
inline constexpr const char* kDocstoreUser = "postgres";

}  // namespace tailscope::svc::stores
