#include "broker/config.h"

#include <toml++/toml.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "fmt/format.h"
#include "common/duration.h"
#include "cluster/etcd_client.h"
#include "common/message_limits.h"
#include "common/status.h"

namespace tokimq::broker {
namespace {

absl::Status Bad(const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(fmt::format("config key '{}': {}", key, why));
}

// The value of a TOML integer; nullopt for any other type. Not node.value<int64_t>(): that also
// converts a float, with a cast that is undefined behaviour when the float is out of the
// int64 range ("port = 9e100"), and the keys are documented as integers.
std::optional<int64_t> IntegerOf(const toml::node& node) {
  if (const toml::value<int64_t>* v = node.as_integer()) return v->get();
  return std::nullopt;
}

// A duration is either an integer (ms) or a string with units.
absl::Status GetDuration(const toml::node& node, const std::string& key, int64_t* out) {
  if (auto v = IntegerOf(node)) {
    if (*v < 0) return Bad(key, "must be >= 0");
    *out = *v;
    return absl::OkStatus();
  }
  if (auto s = node.value<std::string>()) {
    absl::StatusOr<int64_t> ms = ParseDuration(*s);
    if (!ms.ok()) return Bad(key, std::string(ms.status().message()));
    *out = *ms;
    return absl::OkStatus();
  }
  return Bad(key, "expected a duration like \"30s\" or an integer of ms");
}

template <typename T>
absl::Status GetInt(const toml::node& node, const std::string& key, T* out, int64_t lo,
                    int64_t hi) {
  std::optional<int64_t> v = IntegerOf(node);
  if (!v) return Bad(key, "expected an integer");
  if (*v < lo || *v > hi) return Bad(key, fmt::format("must be {}..{}", lo, hi));
  *out = static_cast<T>(*v);
  return absl::OkStatus();
}

absl::Status GetString(const toml::node& node, const std::string& key, std::string* out) {
  auto v = node.value<std::string>();
  if (!v) return Bad(key, "expected a string");
  *out = *v;
  return absl::OkStatus();
}

absl::Status ApplyGroup(const std::string& group, const toml::table& t, GroupPolicy* p) {
  for (const auto& [k, node] : t) {
    std::string key = fmt::format("group.{}.{}", group, std::string(k.str()));
    absl::Status s;
    if (k == "max_attempts") {
      s = GetInt(node, key, &p->max_attempts, 1, 1000);
    } else if (k == "ttl") {
      s = GetDuration(node, key, &p->ttl_ms);
    } else if (k == "backoff") {
      const toml::array* arr = node.as_array();
      if (!arr) return Bad(key, "expected an array of durations");
      p->backoff_ms.clear();
      for (const toml::node& el : *arr) {
        int64_t ms = 0;
        s = GetDuration(el, key, &ms);
        if (!s.ok()) return s;
        p->backoff_ms.push_back(ms);
      }
    } else {
      return Bad(key, "unknown key");
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The Apply*Key steps: each knows the top-level keys of one area and returns std::nullopt for
// any other key, else the result of applying `node` to *c.
using KeyResult = std::optional<absl::Status>;

absl::StatusOr<bool> GetBool(const toml::node& node, const std::string& key) {
  auto v = node.value<bool>();
  if (!v) return Bad(key, "expected true or false");
  return *v;
}

// The network server: listening address, threads, frame limit, TLS.
KeyResult ApplyServerKey(const std::string& key, const toml::node& node, BrokerConfig* c) {
  ServerOptions& srv = c->server;
  if (key == "bind") return GetString(node, key, &srv.bind_address);
  if (key == "port") return GetInt(node, key, &srv.port, 0, 65535);
  if (key == "http_port") return GetInt(node, key, &c->http_port, 0, 65535);
  if (key == "port_file") return GetString(node, key, &c->port_file);
  if (key == "io_threads") return GetInt(node, key, &srv.io_threads, 1, 64);
  if (key == "worker_threads") return GetInt(node, key, &srv.worker_threads, 1, 1024);
  if (key == "max_frame_bytes") {
    return GetInt(node, key, &srv.max_frame_bytes, 1024, int64_t{1} << 30);
  }
  if (key == "tls_cert") return GetString(node, key, &srv.tls_cert_file);
  if (key == "tls_key") return GetString(node, key, &srv.tls_key_file);
  if (key == "tls_mode") return GetString(node, key, &c->tls_mode);
  return std::nullopt;
}

KeyResult ApplyLogKey(const std::string& key, const toml::node& node, BrokerConfig* c) {
  if (key == "log_level") return GetString(node, key, &c->log_level);
  if (key == "log_file") return GetString(node, key, &c->log_file);
  if (key == "log_format") {
    std::string format;
    TOKIMQ_RETURN_IF_ERROR(GetString(node, key, &format));
    if (format != "text" && format != "json") return Bad(key, "expected \"text\" or \"json\"");
    c->log_format = format;
    return absl::OkStatus();
  }
  return std::nullopt;
}

// Cluster membership in etcd (docs/cluster.md).
KeyResult ApplyClusterKey(const std::string& key, const toml::node& node, BrokerConfig* c) {
  if (key == "cluster") return GetString(node, key, &c->cluster.cluster);
  if (key == "etcd_endpoints") {
    std::string list;
    TOKIMQ_RETURN_IF_ERROR(GetString(node, key, &list));
    auto eps = cluster::ParseEndpoints(list);
    if (!eps.ok()) return Bad(key, std::string(eps.status().message()));
    c->cluster.etcd_endpoints = *eps;
    return absl::OkStatus();
  }
  if (key == "broker_name") return GetString(node, key, &c->cluster.broker_name);
  if (key == "advertise") return GetString(node, key, &c->cluster.advertise);
  if (key == "advertise_grpc") return GetString(node, key, &c->cluster.advertise_grpc);
  if (key == "lease_ttl") {  // a duration, whole seconds ("3s"); etcd leases count seconds
    int64_t ms = 0;
    if (absl::Status s = GetDuration(node, key, &ms); !s.ok()) return s;
    if (ms < 1000 || ms % 1000 != 0) {
      return absl::InvalidArgumentError("lease_ttl must be whole seconds, at least 1s");
    }
    c->cluster.lease_ttl_s = ms / 1000;
    return absl::OkStatus();
  }
  return std::nullopt;
}

// Broker group membership and replication (docs/replication.md).
KeyResult ApplyReplicationKey(const std::string& key, const toml::node& node, BrokerOptions* b) {
  if (key == "broker_id") return GetInt(node, key, &b->broker_id, 0, 1 << 20);
  if (key == "replicate_from") return GetString(node, key, &b->replicate_from);
  if (key == "replication") {
    std::string mode;
    TOKIMQ_RETURN_IF_ERROR(GetString(node, key, &mode));
    if (mode != "sync" && mode != "async") return Bad(key, "expected \"sync\" or \"async\"");
    b->replication_sync = mode == "sync";
    b->replication_explicit = true;  // a group member (docs/replication.md)
    return absl::OkStatus();
  }
  if (key == "replication_access_key") return GetString(node, key, &b->replication_access_key);
  if (key == "replication_secret_key") return GetString(node, key, &b->replication_secret_key);
  if (key == "replication_tls") {
    TOKIMQ_ASSIGN_OR_RETURN(bool on, GetBool(node, key));
    b->replication_tls = on;
    return absl::OkStatus();
  }
  if (key == "replication_tls_ca") return GetString(node, key, &b->replication_tls_ca_file);
  if (key == "replication_tls_server_name") {
    return GetString(node, key, &b->replication_tls_server_name);
  }
  if (key == "replication_ack_timeout") {
    return GetDuration(node, key, &b->replication_ack_timeout_ms);
  }
  return std::nullopt;
}

// The CommitLog and the files under data_dir: flush policy, sizes, retention, disk watermark.
KeyResult ApplyStorageKey(const std::string& key, const toml::node& node, BrokerOptions* b) {
  if (key == "data_dir") return GetString(node, key, &b->data_dir);
  if (key == "flush") {
    std::string mode;
    TOKIMQ_RETURN_IF_ERROR(GetString(node, key, &mode));
    if (mode == "sync") {
      b->flush_mode = FlushMode::kSync;
    } else if (mode == "async") {
      b->flush_mode = FlushMode::kAsync;
    } else {
      return Bad(key, "expected \"sync\" or \"async\"");
    }
    return absl::OkStatus();
  }
  if (key == "async_flush_interval") return GetDuration(node, key, &b->async_flush_interval_ms);
  if (key == "segment_size") {
    return GetInt(node, key, &b->commitlog_segment_size, 4096, int64_t{1} << 40);
  }
  if (key == "max_message_size") {
    return GetInt(node, key, &b->max_message_size, 1, int64_t{64} << 20);
  }
  if (key == "retention") return GetDuration(node, key, &b->default_retention_ms);
  if (key == "retention_interval") return GetDuration(node, key, &b->retention_interval_ms);
  if (key == "max_open_files") return GetInt(node, key, &b->max_open_files, 0, int64_t{1} << 24);
  if (key == "disk_min_free") {
    return GetInt(node, key, &b->disk_min_free_bytes, 0, int64_t{1} << 50);
  }
  if (key == "disk_max_used_ratio") {
    auto v = node.value<double>();
    if (!v) return Bad(key, "expected a number (e.g. 0.9)");
    if (!(*v > 0 && *v <= 1)) return Bad(key, "must be in (0, 1] (1 = off)");
    b->disk_max_used_ratio = *v;
    return absl::OkStatus();
  }
  if (key == "disk_check_interval") {
    TOKIMQ_RETURN_IF_ERROR(GetDuration(node, key, &b->disk_check_interval_ms));
    if (b->disk_check_interval_ms <= 0) return Bad(key, "must be > 0");
    return absl::OkStatus();
  }
  return std::nullopt;
}

// The clock and the timer store.
KeyResult ApplyTimerKey(const std::string& key, const toml::node& node, BrokerOptions* b) {
  if (key == "manual_clock") {
    TOKIMQ_ASSIGN_OR_RETURN(b->manual_clock, GetBool(node, key));
    return absl::OkStatus();
  }
  if (key == "timer_precision") return GetDuration(node, key, &b->timer_precision_ms);
  if (key == "timer_thread_nice") return GetInt(node, key, &b->timer_thread_nice, -20, 19);
  if (key == "timer_realtime_priority") {
    return GetInt(node, key, &b->timer_realtime_priority, 0, 99);
  }
  if (key == "timer_window") return GetDuration(node, key, &b->timer_window_ms);
  return std::nullopt;
}

// Consumers ([group.<name>] policies, long polling), transactions and auth.
KeyResult ApplyServiceKey(const std::string& key, const toml::node& node, BrokerOptions* b) {
  if (key == "max_long_poll") return GetDuration(node, key, &b->max_long_poll_ms);
  if (key == "group") {
    const toml::table* groups = node.as_table();
    if (!groups) return Bad(key, "expected [group.<name>] tables");
    for (const auto& [g, gnode] : *groups) {
      const toml::table* gt = gnode.as_table();
      if (!gt) return Bad("group." + std::string(g.str()), "expected a table");
      TOKIMQ_RETURN_IF_ERROR(
          ApplyGroup(std::string(g.str()), *gt, &b->group_policies[std::string(g.str())]));
    }
    return absl::OkStatus();
  }
  if (key == "transaction_immunity") {  // docs/transactions.md
    TOKIMQ_RETURN_IF_ERROR(GetDuration(node, key, &b->transaction_immunity_ms));
    if (b->transaction_immunity_ms < 1 || b->transaction_immunity_ms > 3'600'000) {
      return Bad(key, "must be within 1ms..1h");
    }
    return absl::OkStatus();
  }
  if (key == "transaction_check_interval") {
    TOKIMQ_RETURN_IF_ERROR(GetDuration(node, key, &b->transaction_check_interval_ms));
    if (b->transaction_check_interval_ms <= 0) return Bad(key, "must be > 0");
    return absl::OkStatus();
  }
  if (key == "transaction_max_checks") {
    return GetInt(node, key, &b->transaction_max_checks, 1, 1000);
  }
  if (key == "auth") {
    TOKIMQ_ASSIGN_OR_RETURN(b->auth, GetBool(node, key));
    return absl::OkStatus();
  }
  if (key == "auth_init_user") return GetString(node, key, &b->auth_init_user);
  return std::nullopt;
}

absl::Status Apply(const toml::table& root, BrokerConfig* c) {
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    KeyResult r = ApplyServerKey(key, node, c);
    if (!r) r = ApplyLogKey(key, node, c);
    if (!r) r = ApplyStorageKey(key, node, &c->broker);
    if (!r) r = ApplyReplicationKey(key, node, &c->broker);
    if (!r) r = ApplyClusterKey(key, node, c);
    if (!r) r = ApplyTimerKey(key, node, &c->broker);
    if (!r) r = ApplyServiceKey(key, node, &c->broker);
    if (!r) return Bad(key, "unknown key");
    if (!r->ok()) return *r;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadConfigText(const std::string& text, BrokerConfig* config) {
  // toml++ is built with exceptions here; they stop at this shim.
  try {
    toml::table root = toml::parse(text);
    absl::Status s = Apply(root, config);
    if (!s.ok()) return s;
    // A message of the max size must still fit one receive answer (docs/protocol.md "Message
    // limits"), else it is stored and can never be received.
    const uint64_t need = uint64_t{config->broker.max_message_size} + kMaxMessageOverheadBytes;
    if (need > config->server.max_frame_bytes) {
      return absl::InvalidArgumentError(fmt::format(
          "max_message_size = {} needs max_frame_bytes >= {} (the body plus {} bytes of key, "
          "tag, properties and fields in a receive answer); max_frame_bytes is {}",
          config->broker.max_message_size, need, kMaxMessageOverheadBytes,
          config->server.max_frame_bytes));
    }
    return absl::OkStatus();
  } catch (const toml::parse_error& err) {
    return absl::InvalidArgumentError(fmt::format("config line {}: {}", err.source().begin.line,
                                                  std::string(err.description())));
  }
}

absl::Status LoadConfigFile(const std::string& path, BrokerConfig* config) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read config file {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::Status s = LoadConfigText(ss.str(), config);
  if (!s.ok()) return absl::Status(s.code(), path + ": " + std::string(s.message()));
  return absl::OkStatus();
}

namespace {

absl::Status ResolveServerTls(BrokerConfig* c) {
  ServerOptions& srv = c->server;
  if (srv.tls_cert_file.empty() != srv.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate (tls_cert) and a key (tls_key)");
  }
  if (c->tls_mode.empty()) {
    srv.tls_mode = srv.tls_cert_file.empty() ? TlsMode::kDisabled : TlsMode::kPermissive;
    return absl::OkStatus();
  }
  absl::StatusOr<TlsMode> mode = ParseTlsMode(c->tls_mode);
  if (!mode.ok()) return mode.status();
  if (*mode != TlsMode::kDisabled && srv.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("TLS mode {} needs tls_cert and tls_key", c->tls_mode));
  }
  srv.tls_mode = *mode;
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveTls(BrokerConfig* c) {
  TOKIMQ_RETURN_IF_ERROR(ResolveServerTls(c));
  // A group shares one TLS policy: a member that accepts only TLS expects its leader to as well
  // (docs/replication.md "TLS between members"). Given explicitly, replication_tls wins.
  BrokerOptions& b = c->broker;
  if (!b.replication_tls.has_value()) b.replication_tls = c->server.tls_mode == TlsMode::kEnforcing;
  if (!*b.replication_tls &&
      (!b.replication_tls_ca_file.empty() || !b.replication_tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "replication_tls_ca / replication_tls_server_name are set but replication_tls is off");
  }
  return absl::OkStatus();
}

bool IsLoopbackBind(const std::string& address) {
  if (address == "localhost" || address == "::1" || address == "[::1]") return true;
  return address.rfind("127.", 0) == 0;
}

}  // namespace tokimq::broker
