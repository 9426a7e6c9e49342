// BrokerConfig: everything tokimq-broker can be told, from a TOML file and/or flags (flags win).
// Grammar and defaults: docs/configuration.md. Durations accept "30s", "7d", ... (common/duration.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "broker/broker.h"
#include "broker/cluster_options.h"
#include "broker/server.h"

namespace tokimq::broker {

struct BrokerConfig {
  BrokerOptions broker;
  ServerOptions server;
  ClusterOptions cluster;  // docs/cluster.md; empty name: single node
  std::string log_level = "info";
  std::string log_file;   // empty: stderr
  std::string log_format = "text";  // "text" (spdlog's pattern) or "json" (common/json_log_formatter.h)
  std::string port_file;  // when set, the bound port is written there after listen
  // The HTTP port (/metrics, /healthz, /readyz, the console; docs/metrics.md) on the bind
  // address. -1: the default, 9464, which the broker skips with an error in the log when it is
  // taken (another broker on the host); 0: off; else that port, and a failure to bind it stops
  // the start.
  int http_port = -1;
  // --tls-mode / tls_mode as given ("" : permissive with a certificate, else disabled);
  // ResolveTls turns it into server.tls_mode.
  std::string tls_mode;
};

// Sets config->server.tls_mode from config->tls_mode and the certificate options (issue 17:
// default permissive when a certificate is given, else disabled). kInvalidArgument for an
// unknown mode, a certificate without a key (or the reverse), or a TLS mode without both.
absl::Status ResolveTls(BrokerConfig* config);

// Applies the keys of the TOML file at `path` onto `config`. kInvalidArgument names the key
// and the problem (unknown keys are errors, so typos do not pass silently).
absl::Status LoadConfigFile(const std::string& path, BrokerConfig* config);
// True for an address only this host can reach: 127.0.0.0/8, ::1, localhost. A broker bound
// elsewhere with auth off logs a warning at start (issue 17).
bool IsLoopbackBind(const std::string& address);

// Same, from TOML text (tests).
absl::Status LoadConfigText(const std::string& text, BrokerConfig* config);

}  // namespace tokimq::broker
