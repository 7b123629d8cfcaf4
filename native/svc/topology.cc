#include "svc/topology.h"

#include <cctype>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/affinity.h"

namespace tailscope::svc {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

std::string need_string(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    bad(where, std::string("needs a non-empty string '") + key + "'");
  return j[key].get<std::string>();
}

size_t optional_size(const json& j, const char* key, size_t fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number_unsigned() || j[key].get<uint64_t>() > (64u << 20))
    bad(where, std::string("'") + key + "' must be an integer in 0 … 64 MiB");
  return j[key].get<size_t>();
}

// An integer in [lo, hi]; checked as the JSON number it is, so 1e20 or -1
// cannot wrap in a conversion to int.
bool integer_in(const json& v, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo;
  }
  return v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
}

// A capacity or a fan-out limit: an integer in 1 … kMaxCapacity.
constexpr int64_t kMaxCapacity = 100000;
int64_t parse_limit(const json& j, const char* key, const std::string& where) {
  if (!integer_in(j[key], 1, kMaxCapacity))
    bad(where, std::string("'") + key + "' must be an integer in 1 … " + std::to_string(kMaxCapacity) + " (got " +
                   j[key].dump() + ")");
  return j[key].get<int64_t>();
}

void check_keys(const json& j, std::initializer_list<const char*> allowed, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) bad(where, "unknown key '" + it.key() + "'");
  }
}

// `yields`, `members`, `for_each`, `response`: the name of a list a request carries (only `followers` so far).
IdList parse_id_list(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) return IdList::kNone;
  if (!j[key].is_string() || j[key].get<std::string>() != "followers")
    bad(where, std::string("'") + key + "' names the list a request carries: followers (got " + j[key].dump() + ")");
  return IdList::kFollowers;
}

CallSpec parse_call(const json& j, const std::string& where, CallSpec::Launch default_launch) {
  if (!j.is_object()) bad(where, "a call is an object");
  check_keys(j, {"name", "service", "endpoint", "span", "launch", "request_bytes", "capacity", "yields"}, where);
  CallSpec c;
  c.service = need_string(j, "service", where);
  c.endpoint = need_string(j, "endpoint", where);
  c.name = j.contains("name") ? need_string(j, "name", where) : c.service;
  c.span = j.contains("span") ? need_string(j, "span", where) : c.endpoint + "_client";
  c.request_bytes = optional_size(j, "request_bytes", 64, where);
  if (j.contains("capacity")) c.capacity = parse_limit(j, "capacity", where);
  c.yields = parse_id_list(j, "yields", where);
  c.launch = default_launch;
  if (j.contains("launch")) {
    const std::string l = need_string(j, "launch", where);
    if (l == "async")
      c.launch = CallSpec::Launch::kAsync;
    else if (l == "deferred")
      c.launch = CallSpec::Launch::kDeferred;
    else if (l == "sync")
      c.launch = CallSpec::Launch::kSync;
    else
      bad(where, "launch must be async, deferred or sync (got '" + l + "')");
  }
  return c;
}

StageList parse_stages(const json& j, const std::string& where);

KeyTemplate parse_key(const std::string& text, const std::string& where) {
  KeyTemplate k;
  k.source = text;
  std::string literal;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '}') bad(where, "'key' has a '}' without '{': \"" + text + "\"");
    if (text[i] != '{') {
      literal += text[i];
      continue;
    }
    const size_t end = text.find('}', i);
    if (end == std::string::npos) bad(where, "'key' has an unclosed '{': \"" + text + "\"");
    const std::string name = text.substr(i + 1, end - i - 1);
    KeyTemplate::Var var = KeyTemplate::Var::kNone;
    if (name == "user")
      var = KeyTemplate::Var::kUser;
    else if (name == "hotel")
      var = KeyTemplate::Var::kHotel;
    else if (name == "post")
      var = KeyTemplate::Var::kPost;
    else if (name == "follower")
      var = KeyTemplate::Var::kFollower;
    else
      bad(where, "'key' names unknown variable {" + name + "} (known: {user}, {hotel}, {post}, {follower})");
    k.parts.push_back({std::move(literal), var});
    literal.clear();
    i = end;
  }
  if (!literal.empty()) k.parts.push_back({std::move(literal), KeyTemplate::Var::kNone});
  // Keys travel in memcached's text protocol: no whitespace or control bytes, at most 250 bytes.
  for (char c : text)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) bad(where, "'key' must not contain spaces or control bytes");
  if (text.size() > 200) bad(where, "'key' is longer than 200 characters");
  return k;
}

// The real-operation fields of a store stage (op, key, value_bytes,
// collection, limit, keep): which system takes which op, and which fields each op needs.
void parse_real_op(const json& v, StoreOp& op, const std::string& here) {
  const bool any = v.contains("op") || v.contains("key") || v.contains("value_bytes") || v.contains("collection") ||
                   v.contains("limit") || v.contains("keep");
  if (!any) return;
  if (!v.contains("op")) bad(here, "'key', 'value_bytes', 'collection', 'limit' and 'keep' need 'op'");
  const std::string verb = need_string(v, "op", here);
  struct Allowed {
    const char* system;
    StoreSystem id;
    std::initializer_list<std::pair<const char*, StoreVerb>> ops;
  };
  static const Allowed kAllowed[] = {
      {"memcached", StoreSystem::kMemcached, {{"get", StoreVerb::kGet}, {"set", StoreVerb::kSet}}},
      {"redis",
       StoreSystem::kRedis,
       {{"get", StoreVerb::kGet},
        {"set", StoreVerb::kSet},
        {"zadd", StoreVerb::kZadd},
        {"zrevrange", StoreVerb::kZrevrange},
        {"sadd", StoreVerb::kSadd},
        {"smembers", StoreVerb::kSmembers}}},
      {"mongodb",
       StoreSystem::kMongodb,
       {{"find", StoreVerb::kFind}, {"insert", StoreVerb::kInsert}, {"update", StoreVerb::kUpdate}}},
  };
  const Allowed* system = nullptr;
  for (const Allowed& a : kAllowed)
    if (op.system == a.system) system = &a;
  if (!system)
    bad(here, "'op' needs 'system' memcached, redis or mongodb (got '" + op.system + "': a simulated-only system)");
  std::string known;
  for (const auto& [name, id] : system->ops) {
    known += (known.empty() ? "" : ", ") + std::string(name);
    if (verb == name) op.op = id;
  }
  if (op.op == StoreVerb::kNone) bad(here, "'op' for " + op.system + " is one of " + known + " (got '" + verb + "')");
  op.real_system = system->id;
  op.key = parse_key(need_string(v, "key", here), here);
  if (v.contains("value_bytes")) {
    if (!store_verb_writes(op.op)) bad(here, "'value_bytes' is for writes (set, insert, update, zadd, sadd)");
    if (!integer_in(v["value_bytes"], 1, 1 << 20)) bad(here, "'value_bytes' must be an integer in 1 … 1048576");
    op.value_bytes = v["value_bytes"].get<size_t>();
  }
  if (op.real_system == StoreSystem::kMongodb) {
    op.collection = need_string(v, "collection", here);
    // The collection names a table: letters, digits and '_' only (it is spliced into SQL).
    for (char c : op.collection)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_') || std::isupper(static_cast<unsigned char>(c)))
        bad(here, "'collection' may hold lower-case letters, digits and '_' only (got '" + op.collection + "')");
    if (std::isdigit(static_cast<unsigned char>(op.collection[0])) || op.collection.size() > 60)
      bad(here, "'collection' must start with a letter and be at most 60 characters");
  } else if (v.contains("collection")) {
    bad(here, "'collection' is for the document store (system: mongodb)");
  }
  if (v.contains("limit")) {
    if (op.op != StoreVerb::kZrevrange && op.op != StoreVerb::kSmembers && op.op != StoreVerb::kFind)
      bad(here, "'limit' is for zrevrange, smembers and find");
    if (!integer_in(v["limit"], 1, 10000)) bad(here, "'limit' must be an integer in 1 … 10000");
    op.limit = v["limit"];
  }
  if (v.contains("keep")) {
    if (op.op != StoreVerb::kZadd) bad(here, "'keep' is for zadd (the set trimmed to its newest members)");
    if (v.contains("members")) bad(here, "'keep' trims a timeline: not with 'members' (a list written whole)");
    if (!integer_in(v["keep"], 1, 1000000)) bad(here, "'keep' must be an integer in 1 … 1000000");
    op.keep = v["keep"];
  }
}

// The follower-list fields of a store stage (yields, members, for_each): which op takes which.
void parse_follower_fields(const json& v, StoreOp& op, const std::string& here) {
  op.yields = parse_id_list(v, "yields", here);
  op.members = parse_id_list(v, "members", here);
  op.for_each = parse_id_list(v, "for_each", here);
  if (op.yields != IdList::kNone && op.op != StoreVerb::kZrevrange && op.op != StoreVerb::kSmembers &&
      op.op != StoreVerb::kFind)
    bad(here, "'yields' is for a real read that returns ids (zrevrange, smembers, find)");
  if (op.members != IdList::kNone) {
    if (op.op != StoreVerb::kZadd && op.op != StoreVerb::kSadd)
      bad(here, "'members' is for zadd and sadd (one command, every id a member)");
    if (v.contains("value_bytes")) bad(here, "'members' writes the ids themselves: no 'value_bytes'");
  }
  if (op.for_each != IdList::kNone) {
    if (!store_verb_writes(op.op)) bad(here, "'for_each' needs a real write 'op' (set, zadd, sadd, insert, update)");
    if (op.members != IdList::kNone) bad(here, "'for_each' and 'members' together: one op per id, or one for all");
  }
  bool follower_key = false;
  for (const auto& p : op.key.parts) follower_key = follower_key || p.var == KeyTemplate::Var::kFollower;
  if (op.for_each != IdList::kNone && !follower_key)
    bad(here, "'for_each: followers' writes to each follower's key: 'key' needs {follower}");
  if (op.for_each == IdList::kNone && follower_key)
    bad(here, "'key' uses {follower}, which needs 'for_each: followers'");
  if (op.fans_out() && (v.contains("count") || v.contains("parallel")))
    bad(here, "'count' and 'parallel' do not go with 'members' or 'for_each' (the list decides how many)");
}

std::map<std::string, StoreServerSpec> parse_store_servers(const json& j, const std::string& origin) {
  const std::string where = origin + ": store_servers";
  if (!j.is_object()) bad(where, "a mapping of memcached, redis, mongodb to {cpus, memory_mib}");
  std::map<std::string, StoreServerSpec> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string here = where + "." + it.key();
    if (it.key() != "memcached" && it.key() != "redis" && it.key() != "mongodb")
      bad(where, "unknown store system '" + it.key() + "' (memcached, redis, mongodb)");
    const json& v = it.value();
    if (!v.is_object()) bad(here, "a mapping {cpus, memory_mib}");
    check_keys(v, {"cpus", "memory_mib"}, here);
    StoreServerSpec spec;
    if (v.contains("cpus")) {
      if (!v["cpus"].is_string() || v["cpus"].get<std::string>().empty())
        bad(here, "'cpus' must be a non-empty cpu list string such as \"0-1,3\"");
      spec.cpus = v["cpus"].get<std::string>();
      try {
        parse_cpu_list(spec.cpus);
      } catch (const std::invalid_argument& e) {
        bad(here, std::string("'cpus': ") + e.what());
      }
    }
    if (v.contains("memory_mib")) {
      if (!integer_in(v["memory_mib"], 1, 65536)) bad(here, "'memory_mib' must be an integer in 1 … 65536");
      spec.memory_mib = v["memory_mib"];
    }
    out.emplace(it.key(), spec);
  }
  return out;
}

Stage parse_stage(const json& j, const std::string& where) {
  if (!j.is_object() || j.size() != 1)
    bad(where, "a stage is an object with exactly one key: cpu, call, group, store or work");
  Stage s;
  const std::string key = j.begin().key();
  const json& v = j.begin().value();
  const std::string here = where + "." + key;
  if (key == "cpu") {
    s.kind = Stage::Kind::kCpu;
    s.cpu = parse_distribution(v, here);
  } else if (key == "call") {
    s.kind = Stage::Kind::kCall;
    s.call = parse_call(v, here, CallSpec::Launch::kSync);
    if (s.call.launch != CallSpec::Launch::kSync)
      bad(here, "a lone call is sync; use a group to launch async/deferred");
  } else if (key == "group") {
    s.kind = Stage::Kind::kGroup;
    if (!v.is_object() || !v.contains("calls") || !v["calls"].is_array() || v["calls"].empty())
      bad(here, "a group needs a non-empty array 'calls'");
    check_keys(v, {"calls", "join", "max_in_flight"}, here);
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < v["calls"].size(); ++i) {
      CallSpec c = parse_call(v["calls"][i], here + ".calls[" + std::to_string(i) + "]", CallSpec::Launch::kAsync);
      if (c.launch == CallSpec::Launch::kSync) bad(here, "calls in a group are async or deferred");
      if (!index.emplace(c.name, i).second) bad(here, "two calls named '" + c.name + "'");
      s.group.calls.push_back(std::move(c));
    }
    if (v.contains("max_in_flight")) {
      s.group.max_in_flight = parse_limit(v, "max_in_flight", here);
      for (const CallSpec& c : s.group.calls)
        if (c.launch != CallSpec::Launch::kAsync)
          bad(here, "'max_in_flight' is for groups of async calls (call '" + c.name + "' is deferred)");
    }
    if (v.contains("join")) {
      if (!v["join"].is_array()) bad(here, "'join' is an array of call names");
      std::set<size_t> seen;
      for (const auto& n : v["join"]) {
        if (!n.is_string() || !index.count(n.get<std::string>())) bad(here, "join names unknown call " + n.dump());
        if (!seen.insert(index[n.get<std::string>()]).second) bad(here, "join names " + n.dump() + " twice");
        s.group.join_order.push_back(index[n.get<std::string>()]);
      }
      if (s.group.join_order.size() != s.group.calls.size()) bad(here, "join must name every call of the group once");
    } else {
      for (size_t i = 0; i < s.group.calls.size(); ++i) s.group.join_order.push_back(i);
    }
  } else if (key == "store") {
    s.kind = Stage::Kind::kStore;
    if (!v.is_object()) bad(here, "a store stage is an object");
    check_keys(v,
               {"span", "system", "latency", "count", "hit_ratio", "on_miss", "op", "key", "value_bytes", "collection",
                "limit", "keep", "capacity", "parallel", "yields", "members", "for_each"},
               here);
    s.store.span = need_string(v, "span", here);
    s.store.system = v.contains("system") ? need_string(v, "system", here) : "store";
    parse_real_op(v, s.store, here);
    parse_follower_fields(v, s.store, here);
    if (!v.contains("latency")) bad(here, "needs 'latency'");
    s.store.latency = parse_distribution(v["latency"], here + ".latency");
    if (v.contains("count")) {
      if (!integer_in(v["count"], 1, 1000)) bad(here, "'count' must be an integer in 1 … 1000");
      s.store.count = v["count"];
    }
    if (v.contains("capacity")) s.store.capacity = parse_limit(v, "capacity", here);
    if (v.contains("parallel")) {
      if (!v["parallel"].is_boolean()) bad(here, "'parallel' must be true or false");
      s.store.parallel = v["parallel"].get<bool>();
      if (s.store.parallel && s.store.real())
        bad(here, "'parallel' is for simulated stores only: a real 'op' runs its count in a row");
      if (s.store.parallel && s.store.count < 2)
        bad(here, "'parallel' needs 'count' of at least 2 (got " + std::to_string(s.store.count) + ")");
    }
    if (v.contains("hit_ratio")) {
      if (!v["hit_ratio"].is_number() || v["hit_ratio"].get<double>() < 0 || v["hit_ratio"].get<double>() > 1)
        bad(here, "'hit_ratio' must be in [0, 1]");
      s.store.hit_ratio = v["hit_ratio"].get<double>();
    }
    if (v.contains("on_miss")) {
      if (!s.store.hit_ratio) bad(here, "'on_miss' needs 'hit_ratio'");
      if (s.store.real() && s.store.op != StoreVerb::kGet && s.store.op != StoreVerb::kZrevrange &&
          s.store.op != StoreVerb::kSmembers && s.store.op != StoreVerb::kFind)
        bad(here, "'on_miss' on a real op needs a read that can miss (get, zrevrange, smembers, find)");
      s.store.on_miss = std::make_shared<StageList>(parse_stages(v["on_miss"], here + ".on_miss"));
    }
  } else if (key == "work") {
    s.kind = Stage::Kind::kWork;
    s.work = parse_work_spec(v, here);
  } else {
    bad(where, "unknown stage '" + key + "' (cpu, call, group, store, work)");
  }
  return s;
}

StageList parse_stages(const json& j, const std::string& where) {
  if (!j.is_array()) bad(where, "stages are an array");
  StageList out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(parse_stage(j[i], where + "[" + std::to_string(i) + "]"));
  return out;
}

void for_each_call(const StageList& stages, const std::function<void(const CallSpec&)>& fn) {
  for (const auto& s : stages) {
    if (s.kind == Stage::Kind::kCall) fn(s.call);
    if (s.kind == Stage::Kind::kGroup)
      for (const auto& c : s.group.calls) fn(c);
    if (s.kind == Stage::Kind::kStore && s.store.on_miss) for_each_call(*s.store.on_miss, fn);
  }
}

// Assigns the service's capacity limiters (Service::capacities) and points
// every endpoint, store stage and call at its own. One limiter per endpoint, per
// store span name and per client span name: the stages that share a span name
// share the limiter (one population, as diagnose sees it), so two capacities
// for one name are refused; a stage of that name without a capacity joins it.
class CapacityAssigner {
 public:
  CapacityAssigner(Service& s, const std::string& where) : s_(s), where_(where) {}
  void run() {
    for (auto& [name, e] : s_.endpoints) {
      if (e.capacity > 0) {
        e.limit_index = static_cast<int>(s_.capacities.size());
        s_.capacities.push_back({CapacitySpec::Kind::kEndpoint, name, e.capacity});
      }
      const std::string ew = where_ + ": endpoint '" + name + "': stages";
      walk(e.stages, ew, /*assign=*/false);
    }
    for (auto& [name, e] : s_.endpoints) walk(e.stages, "", /*assign=*/true);
  }

 private:
  void note(CapacitySpec::Kind kind, const std::string& name, int64_t capacity, const std::string& where) {
    if (capacity == 0) return;
    auto [it, fresh] = seen_.try_emplace({kind, name}, Seen{capacity, where});
    if (fresh) {
      index_[{kind, name}] = static_cast<int>(s_.capacities.size());
      s_.capacities.push_back({kind, name, capacity});
    } else if (it->second.capacity != capacity) {
      bad(where, "'capacity' " + std::to_string(capacity) + " for " + capacity_kind_name(kind) + " span '" + name +
                     "', which has 'capacity' " + std::to_string(it->second.capacity) + " at " + it->second.where +
                     " (one limiter per span name: give every stage of that name the same capacity)");
    }
  }
  int find(CapacitySpec::Kind kind, const std::string& name) const {
    auto it = index_.find({kind, name});
    return it == index_.end() ? -1 : it->second;
  }
  void walk(StageList& stages, const std::string& where, bool assign) {
    for (size_t i = 0; i < stages.size(); ++i) {
      Stage& st = stages[i];
      const std::string here = where + "[" + std::to_string(i) + "]";
      if (st.kind == Stage::Kind::kStore) {
        if (assign)
          st.store.limit_index = find(CapacitySpec::Kind::kStore, st.store.span);
        else
          note(CapacitySpec::Kind::kStore, st.store.span, st.store.capacity, here + ".store");
        if (st.store.on_miss) walk(*st.store.on_miss, here + ".store.on_miss", assign);
      }
      if (st.kind == Stage::Kind::kCall) call(st.call, here + ".call", assign);
      if (st.kind == Stage::Kind::kGroup)
        for (size_t j = 0; j < st.group.calls.size(); ++j)
          call(st.group.calls[j], here + ".group.calls[" + std::to_string(j) + "]", assign);
    }
  }
  void call(CallSpec& c, const std::string& where, bool assign) {
    if (assign)
      c.limit_index = find(CapacitySpec::Kind::kCall, c.span);
    else
      note(CapacitySpec::Kind::kCall, c.span, c.capacity, where);
  }
  struct Seen {
    int64_t capacity;
    std::string where;
  };
  Service& s_;
  const std::string& where_;
  std::map<std::pair<CapacitySpec::Kind, std::string>, Seen> seen_;
  std::map<std::pair<CapacitySpec::Kind, std::string>, int> index_;
};

bool any_real_store(const StageList& stages) {
  for (const auto& s : stages)
    if (s.kind == Stage::Kind::kStore && (s.store.real() || (s.store.on_miss && any_real_store(*s.store.on_miss))))
      return true;
  return false;
}

bool any_shared(const StageList& stages) {
  for (const auto& s : stages) {
    if (s.kind == Stage::Kind::kCpu && s.cpu.shared > 0) return true;
    if (s.kind == Stage::Kind::kWork && s.work.simulated_cpu && s.work.simulated_cpu->shared > 0) return true;
    if (s.kind == Stage::Kind::kStore &&
        (s.store.latency.shared > 0 || (s.store.on_miss && any_shared(*s.store.on_miss))))
      return true;
  }
  return false;
}

}  // namespace

const char* capacity_kind_name(CapacitySpec::Kind k) {
  switch (k) {
    case CapacitySpec::Kind::kEndpoint:
      return "endpoint";
    case CapacitySpec::Kind::kStore:
      return "store";
    case CapacitySpec::Kind::kCall:
      return "call";
  }
  return "endpoint";
}

const char* store_verb_name(StoreVerb v) {
  switch (v) {
    case StoreVerb::kNone:
      return "none";
    case StoreVerb::kGet:
      return "get";
    case StoreVerb::kSet:
      return "set";
    case StoreVerb::kZadd:
      return "zadd";
    case StoreVerb::kZrevrange:
      return "zrevrange";
    case StoreVerb::kSadd:
      return "sadd";
    case StoreVerb::kSmembers:
      return "smembers";
    case StoreVerb::kFind:
      return "find";
    case StoreVerb::kInsert:
      return "insert";
    case StoreVerb::kUpdate:
      return "update";
  }
  return "none";
}

bool store_verb_writes(StoreVerb v) {
  return v == StoreVerb::kSet || v == StoreVerb::kZadd || v == StoreVerb::kSadd || v == StoreVerb::kInsert ||
         v == StoreVerb::kUpdate;
}

bool Topology::has_real_stores() const {
  for (const auto& [_, s] : services)
    for (const auto& [endpoint_name, e] : s.endpoints)
      if (any_real_store(e.stages)) return true;
  return false;
}

bool Topology::has_shared_stages() const {
  for (const auto& [_, s] : services)
    for (const auto& [endpoint_name, e] : s.endpoints)
      if (any_shared(e.stages)) return true;
  return false;
}

const Service& Topology::service(const std::string& name) const {
  auto it = services.find(name);
  if (it == services.end()) throw std::invalid_argument("topology: unknown service '" + name + "'");
  return it->second;
}

std::vector<std::string> Topology::start_order() const {
  std::vector<std::string> order;
  std::set<std::string> done;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    if (done.count(name)) return;
    done.insert(name);
    for (const auto& [_, ep] : services.at(name).endpoints)
      for_each_call(ep.stages, [&](const CallSpec& c) { visit(c.service); });
    order.push_back(name);
  };
  for (const auto& [name, _] : services) visit(name);
  return order;
}

Topology parse_topology(const json& doc, const std::string& origin) {
  if (!doc.is_object()) bad(origin, "a topology is a JSON object");
  check_keys(doc, {"name", "call_timeout_ms", "front", "services", "description", "notes", "store_servers"}, origin);
  Topology t;
  t.name = doc.contains("name") ? need_string(doc, "name", origin) : "topology";
  if (doc.contains("call_timeout_ms")) {
    if (!doc["call_timeout_ms"].is_number() || doc["call_timeout_ms"].get<double>() <= 0 ||
        doc["call_timeout_ms"].get<double>() > 600'000)
      bad(origin, "'call_timeout_ms' must be in (0, 600000]");
    t.call_timeout_ns = static_cast<int64_t>(doc["call_timeout_ms"].get<double>() * 1e6);
  }
  if (doc.contains("store_servers")) t.store_servers = parse_store_servers(doc["store_servers"], origin);
  if (!doc.contains("services") || !doc["services"].is_array() || doc["services"].empty())
    bad(origin, "needs a non-empty array 'services'");
  for (size_t i = 0; i < doc["services"].size(); ++i) {
    const json& sj = doc["services"][i];
    std::string where = origin + ": services[" + std::to_string(i) + "]";
    Service s;
    s.name = need_string(sj, "name", where);
    where = origin + ": service '" + s.name + "'";
    check_keys(sj, {"name", "port", "model", "cpus", "endpoints", "description"}, where);
    if (sj.contains("port")) {
      if (!integer_in(sj["port"], 0, 65535)) bad(where, "'port' must be in 0 … 65535");
      s.port = sj["port"];
    }
    if (sj.contains("model")) s.model = need_string(sj, "model", where);
    if (sj.contains("cpus")) {
      // Only the syntax here: which CPUs exist is the machine's business (tailscope-svc --all checks it).
      if (!sj["cpus"].is_string()) bad(where, "'cpus' must be a cpu list string such as \"0-1,3\"");
      s.cpus = sj["cpus"].get<std::string>();
      if (s.cpus.empty()) bad(where, "'cpus' is empty: it leaves the service with no CPU: refused");
      try {
        parse_cpu_list(s.cpus);
      } catch (const std::invalid_argument& e) {
        bad(where, std::string("'cpus': ") + e.what());
      }
    }
    if (!sj.contains("endpoints") || !sj["endpoints"].is_array() || sj["endpoints"].empty())
      bad(where, "needs a non-empty array 'endpoints'");
    for (const auto& ej : sj["endpoints"]) {
      Endpoint e;
      e.name = need_string(ej, "name", where + ": endpoint");
      const std::string ew = where + ": endpoint '" + e.name + "'";
      check_keys(ej, {"name", "span", "response_bytes", "response", "stages", "capacity"}, ew);
      e.server_span = ej.contains("span") ? need_string(ej, "span", ew) : e.name + "_server";
      e.response_bytes = optional_size(ej, "response_bytes", 64, ew);
      e.response = parse_id_list(ej, "response", ew);
      if (ej.contains("capacity")) e.capacity = parse_limit(ej, "capacity", ew);
      e.stages = parse_stages(ej.contains("stages") ? ej["stages"] : json::array(), ew + ": stages");
      if (!s.endpoints.emplace(e.name, std::move(e)).second) bad(ew, "defined twice");
    }
    if (t.services.count(s.name)) bad(where, "defined twice");
    CapacityAssigner(s, where).run();
    t.services.emplace(s.name, std::move(s));
  }
  // Every call names an existing service and endpoint.
  for (const auto& [service_name, s] : t.services)
    for (const auto& [endpoint_name, e] : s.endpoints) {
      // Named references: C++20 lets a lambda capture structured bindings, clang 14 (clang-tidy) does not.
      const std::string& name = service_name;
      const std::string& ename = endpoint_name;
      for_each_call(e.stages, [&](const CallSpec& c) {
        const std::string where = origin + ": service '" + name + "' endpoint '" + ename + "' call '" + c.name + "'";
        auto it = t.services.find(c.service);
        if (it == t.services.end()) bad(where, "unknown service '" + c.service + "'");
        if (!it->second.endpoints.count(c.endpoint))
          bad(where, "service '" + c.service + "' has no endpoint '" + c.endpoint + "'");
        if (c.yields != IdList::kNone && it->second.endpoints.at(c.endpoint).response != c.yields)
          bad(where,
              "'yields: followers' needs the callee's endpoint '" + c.endpoint + "' to have 'response: followers'");
      });
    }
  // No cycles in the endpoint call graph (a cycle would recurse until every call times out).
  std::map<std::string, int> state;  // 1 = on stack, 2 = done
  std::vector<std::string> stack;
  std::function<void(const std::string&, const std::string&)> visit = [&](const std::string& sv,
                                                                          const std::string& ep) {
    const std::string key = sv + "." + ep;
    if (state[key] == 2) return;
    stack.push_back(key);
    if (state[key] == 1) {
      std::string path;
      for (const auto& k : stack) path += (path.empty() ? "" : " → ") + k;
      bad(origin, "call cycle: " + path);
    }
    state[key] = 1;
    for_each_call(t.services.at(sv).endpoints.at(ep).stages, [&](const CallSpec& c) { visit(c.service, c.endpoint); });
    state[key] = 2;
    stack.pop_back();
  };
  for (const auto& [name, s] : t.services)
    for (const auto& [ename, _] : s.endpoints) visit(name, ename);
  if (doc.contains("front")) {
    const json& f = doc["front"];
    const std::string where = origin + ": front";
    check_keys(f, {"service", "path", "endpoint", "routes"}, where);
    FrontSpec fs{
        need_string(f, "service", where), need_string(f, "path", where), need_string(f, "endpoint", where), {}};
    if (!t.services.count(fs.service)) bad(where, "unknown service '" + fs.service + "'");
    if (!t.services.at(fs.service).endpoints.count(fs.endpoint))
      bad(where, "service '" + fs.service + "' has no endpoint '" + fs.endpoint + "'");
    if (fs.path.empty() || fs.path[0] != '/') bad(where, "path must start with '/'");
    std::set<std::string> paths{fs.path};
    if (f.contains("routes")) {
      if (!f["routes"].is_array()) bad(where, "routes must be a list of {path, endpoint}");
      for (size_t i = 0; i < f["routes"].size(); ++i) {
        const json& r = f["routes"][i];
        const std::string rw = where + ": routes[" + std::to_string(i) + "]";
        if (!r.is_object()) bad(rw, "must be a mapping {path, endpoint}");
        check_keys(r, {"path", "endpoint"}, rw);
        FrontRoute route{need_string(r, "path", rw), need_string(r, "endpoint", rw)};
        if (route.path.empty() || route.path[0] != '/') bad(rw, "path must start with '/'");
        if (!paths.insert(route.path).second) bad(rw, "path '" + route.path + "' is served twice");
        if (!t.services.at(fs.service).endpoints.count(route.endpoint))
          bad(rw, "service '" + fs.service + "' has no endpoint '" + route.endpoint + "'");
        fs.routes.push_back(std::move(route));
      }
    }
    t.front = fs;
  }
  return t;
}

Topology load_topology_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot open topology file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_topology_text(ss.str(), path);
}

Topology parse_topology_text(const std::string& text, const std::string& origin, json* doc_out) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    throw std::invalid_argument(origin + ": not valid JSON (convert YAML with `python -m tailscope.topology`)");
  Topology t = parse_topology(doc, origin);
  if (doc_out) *doc_out = std::move(doc);
  return t;
}

json check_topology_input(const std::string& path, const std::string& origin) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) throw std::invalid_argument(path + ": cannot open topology file");
    ss << in.rdbuf();
  }
  json doc;
  parse_topology_text(ss.str(), origin.empty() ? path : origin, &doc);
  return doc;
}

}  // namespace tailscope::svc
