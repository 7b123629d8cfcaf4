// The topology: services, their endpoints and, per endpoint, the stages a
// handler runs. Every concurrency model interprets the same description; only
// how calls are launched and joined differs (docs/microservices.md).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "svc/distribution.h"
#include "svc/work_stage.h"

namespace tailscope::svc {

struct Stage;
using StageList = std::vector<Stage>;

// A list of ids a request carries from the stage that read it to later ones
// (docs/stores.md, "Follower fan-out"): DeathStarBench's home timeline asks
// the social graph for the author's followers, then writes to each one's
// timeline. kFollowers is the only list so far.
enum class IdList { kNone, kFollowers };

// One downstream RPC.
struct CallSpec {
  std::string name;     // label inside a group (join order refers to it)
  std::string service;  // callee service
  std::string endpoint;
  std::string span;  // client span name (DeathStarBench's, e.g. compose_text_client)
  enum class Launch { kSync, kAsync, kDeferred };
  Launch launch = Launch::kSync;
  size_t request_bytes = 64;
  // `capacity`: a client-side pool of this many calls with this span name in
  // flight per service process (0: none). `limit_index` indexes Service::capacities
  // (every call of the service with that span name shares it; -1: none).
  int64_t capacity = 0;
  int limit_index = -1;
  // `yields: followers`: the callee's answer is a follower list (its endpoint
  // has `response: followers`); it becomes the request's.
  IdList yields = IdList::kNone;
};

// A group of calls launched together and joined in `join_order` (indices into calls).
struct CallGroup {
  std::vector<CallSpec> calls;
  std::vector<size_t> join_order;
  // At most this many of the group's calls in flight per group instance
  // (0: all at once); call i > k starts when an earlier one ends. Async-only groups.
  int64_t max_in_flight = 0;
};

// The ids a real store key draws (docs/stores.md): {user} in 0 … kStoreUsers−1,
// {hotel} in 0 … kStoreHotels−1, {post} a fresh id on a write, a recent one on a read.
inline constexpr int kStoreUsers = 962;  // socfb-Reed98's users, as DeathStarBench loads
inline constexpr int kStoreHotels = 80;  // DeathStarBench hotelReservation's hotels

// A store key with placeholders, split once at parse time: literal text and
// the variables between it ("user:{user}" → "user:", kUser). {follower}: one
// id of the request's follower list, in a `for_each: followers` stage only.
struct KeyTemplate {
  enum class Var { kNone, kUser, kHotel, kPost, kFollower };
  struct Part {
    std::string text;  // literal text before var
    Var var = Var::kNone;
  };
  std::vector<Part> parts;
  std::string source;  // as written in the topology
};

// The systems a real operation can reach; kNone: the stage is simulated only.
enum class StoreSystem { kNone, kMemcached, kRedis, kMongodb };
// The real operations (topology `op`); which system accepts which is checked at parse time.
enum class StoreVerb { kNone, kGet, kSet, kZadd, kZrevrange, kSadd, kSmembers, kFind, kInsert, kUpdate };
const char* store_verb_name(StoreVerb v);
bool store_verb_writes(StoreVerb v);  // set, zadd, sadd, insert, update: payload of value_bytes

// A store or cache operation. Simulated form: waits (without CPU) for a
// sampled latency, `count` times in a row; if hit_ratio is set, a miss
// (probability 1 − hit_ratio) then runs `on_miss`. Real form (`op` set and
// the run's store mode real): the operation runs against the real server
// `count` times; a get that finds nothing is the miss that runs on_miss
// (hit_ratio is then ignored).
struct StoreOp {
  std::string span;    // e.g. url_mongo_insert_client
  std::string system;  // mongodb, memcached, redis: the db.system tag
  LatencyDistribution latency;
  int count = 1;
  std::optional<double> hit_ratio;
  std::shared_ptr<StageList> on_miss;
  // The real operation (kNone: none; the stage always waits its latency).
  StoreSystem real_system = StoreSystem::kNone;
  StoreVerb op = StoreVerb::kNone;
  KeyTemplate key;
  size_t value_bytes = 512;  // set / insert / update / zadd / sadd payload
  std::string collection;    // document store (mongodb role): the table
  int limit = 10;            // zrevrange / smembers / find: at most this many results
  // zadd: after the write, the set trimmed to its `keep` highest scores (a
  // capped timeline: its newest posts), in the same round trip; 0: no trim.
  int keep = 0;
  bool real() const { return op != StoreVerb::kNone; }
  // At most `capacity` of this operation (this span name) in flight per
  // service process, FCFS (0: none); `limit_index` indexes Service::capacities.
  int64_t capacity = 0;
  int limit_index = -1;
  // The count operations run at once, not in a row (simulated, count ≥ 2).
  bool parallel = false;
  // Follower lists (docs/stores.md, "Follower fan-out"):
  // `yields: followers` — a real read (zrevrange, smembers, find) whose ids
  // become the request's follower list (zrevrange/smembers: the members' ids;
  // find: the document's `followers` array).
  IdList yields = IdList::kNone;
  // `members: followers` — one zadd/sadd whose members are the whole list (the
  // social graph's cache fill); no command for an empty list.
  IdList members = IdList::kNone;
  // `for_each: followers` — one op per follower, `{follower}` in its key,
  // sent pipelined in one round trip; simulated: one latency draw (that round
  // trip). Without a list, the generated graph's followers of {user}.
  IdList for_each = IdList::kNone;
  // A stage that writes a whole list at once: its ops go as one batch, its span carries the list's size.
  bool fans_out() const { return members != IdList::kNone || for_each != IdList::kNone; }
};

// Top-level `store_servers`: placement and memory of a store process.
struct StoreServerSpec {
  std::string cpus;    // "" = inherit the supervisor's affinity
  int memory_mib = 0;  // 0 = default (memcached -m 64, redis maxmemory 64mb)
};

struct Stage {
  enum class Kind { kCpu, kCall, kGroup, kStore, kWork };
  Kind kind = Kind::kCpu;
  LatencyDistribution cpu;
  CallSpec call;
  CallGroup group;
  StoreOp store;
  WorkSpec work;  // real work: json / sha256 / deflate over a buffer (work_stage.h)
};

struct Endpoint {
  std::string name;
  std::string server_span;  // e.g. compose_post_server
  size_t response_bytes = 64;
  // `response: followers`: the answer carries the request's follower list
  // (stores::encode_followers); response_bytes of filler when it has none
  // (simulated stores read nothing).
  IdList response = IdList::kNone;
  StageList stages;
  // At most `capacity` requests of this endpoint run its stages at once (0:
  // none); `limit_index` indexes Service::capacities.
  int64_t capacity = 0;
  int limit_index = -1;
};

// One capacity limiter of a service process: an endpoint, a store span name or
// a client span name (docs/microservices.md). Stages point at it by index, so a
// request never looks a limiter up by name.
struct CapacitySpec {
  enum class Kind { kEndpoint, kStore, kCall };
  Kind kind = Kind::kEndpoint;
  std::string name;  // the endpoint, or the span name
  int64_t capacity = 1;
};
const char* capacity_kind_name(CapacitySpec::Kind k);

struct Service {
  std::string name;
  int port = 0;       // 0: assigned at start (--all) or ephemeral
  std::string model;  // "" = the command line's --model
  std::string cpus;   // "" = no placement; else a cpu list ("0-1,3"), checked against the machine at run time
  std::map<std::string, Endpoint> endpoints;
  std::vector<CapacitySpec> capacities;  // the limiters the service process creates at start
};

struct FrontRoute {
  std::string path;      // HTTP path served
  std::string endpoint;  // endpoint of the front service it runs
};

struct FrontSpec {
  std::string service;
  std::string path;      // HTTP path served, e.g. /wrk2-api/post/compose
  std::string endpoint;  // endpoint of `service` an HTTP request runs
  // `routes`: further paths on the same front (a request mix, e.g. hotel
  // reservation's /hotels, /recommendations, /user, /reservation).
  std::vector<FrontRoute> routes;
};

struct Topology {
  std::string name;
  int64_t call_timeout_ns = 1'000'000'000;
  std::map<std::string, Service> services;
  std::optional<FrontSpec> front;
  // Top-level `store_servers`, by system name (memcached, redis, mongodb).
  std::map<std::string, StoreServerSpec> store_servers;
  // True when some store stage (anywhere, on_miss included) has a real op.
  bool has_real_stores() const;
  // True when some stage draws from a distribution with a `shared` loading
  // (request_factor.h): then every request needs a trace id, sampled or not.
  bool has_shared_stages() const;

  const Service& service(const std::string& name) const;
  // Services in dependency order (callees first): the order --all starts them.
  std::vector<std::string> start_order() const;
};

// Parses and validates; throws std::invalid_argument with a message naming
// the file, the service/endpoint/stage and what is wrong (unknown service,
// missing endpoint, cycle, bad distribution, ...).
Topology parse_topology(const nlohmann::json& doc, const std::string& origin = "topology");
Topology load_topology_file(const std::string& path);
// The text of a topology JSON document, parsed and validated as
// load_topology_file does; errors name `origin`. Returns the document too,
// for `tailscope-svc --check-topology` (the one validator Python calls).
Topology parse_topology_text(const std::string& text, const std::string& origin, nlohmann::json* doc_out = nullptr);
// `tailscope-svc --check-topology`: reads FILE (or stdin for "-"), validates it
// as parse_topology_text does (errors name `origin`, or FILE when it is "")
// and returns the normalised document.
nlohmann::json check_topology_input(const std::string& path, const std::string& origin);

}  // namespace tailscope::svc
