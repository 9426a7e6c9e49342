// tokimq-broker: opens the data dir, serves the native protocol, stops cleanly on SIGTERM/SIGINT
// (stop accepting, drain requests, stop services, timer checkpoint, clean-shutdown marker).
#include <CLI/CLI.hpp>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "broker/broker.h"
#include "broker/cluster_node.h"
#include "broker/config.h"
#include "broker/fd_budget.h"
#include "broker/server.h"
#include "restart.h"
#include "cluster/etcd_client.h"
#include "common/duration.h"
#include "common/json_log_formatter.h"
#include "console/console.h"
#include "http/http_endpoint.h"
#if TOKIMQ_WITH_ROCKETMQ
#include "rocketmq/grpc_endpoint.h"
#endif

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tokimq-broker: %s\n", msg.c_str());
  return 1;
}

// Set when the cluster refuses this broker's name after it started (etcd was down at start):
// the broker then stops (SIGTERM to itself) and exits with status 1.
std::atomic<bool> g_cluster_conflict{false};

// The restart of a deposed leader (docs/replication.md "Deposed leaders"): requested by the
// Broker's on_restart (a replication thread), which then stops the broker with SIGTERM to
// itself; after the clean shutdown main re-executes the binary (same pid, fresh memory).
std::mutex g_restart_mu;
bool g_restart = false;       // g_restart_mu
bool g_stopping = false;      // g_restart_mu: a stop signal came first; no restart from then on
std::string g_restart_leader;  // g_restart_mu; "" when unknown

// host:port others reach `bind`:`port` at when nothing is advertised explicitly.
std::string DefaultAdvertise(const std::string& bind, int port) {
  const bool any = bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "[::]";
  return (any ? std::string("127.0.0.1") : bind) + ":" + std::to_string(port);
}

// Registers the broker in its cluster (ClusterNode::Start); a name that stays taken by another
// broker stops this one (SIGTERM to itself, exit status 1).
absl::Status StartClusterNode(tokimq::broker::ClusterNode* node,
                              const tokimq::broker::BrokerConfig& config, int port,
                              int grpc_port) {
  std::string advertise = config.cluster.advertise;
  std::string advertise_grpc = config.cluster.advertise_grpc;
  if (advertise.empty()) advertise = DefaultAdvertise(config.server.bind_address, port);
  if (advertise_grpc.empty() && grpc_port != 0) {
    advertise_grpc = DefaultAdvertise(config.server.bind_address, grpc_port);
  }
  return node->Start(advertise, advertise_grpc, [](const absl::Status& s) {
    if (g_cluster_conflict.exchange(true)) return;
    spdlog::error("stopping: {}", s.ToString());
    ::kill(::getpid(), SIGTERM);
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals first, before any thread starts, so only sigwait below sees them:
  // a SIGTERM during start-up (recovery included) is taken once the broker is up, and then
  // shuts it down cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  using tokimq::broker::BrokerConfig;
  CLI::App app{"tokimq-broker: delay-message broker"};
  app.set_version_flag("--version", std::string("tokimq-broker ") + TOKIMQ_VERSION);
  std::string config_file, data_dir, bind, flush, log_level, log_file, log_format, port_file,
      precision;
  int port = -1;
  int grpc_port = 8081;
  int http_port = -1;
  bool manual_clock = false;
  int64_t manual_start_ms = 0;
  int64_t max_open_files = -1;
  app.add_option("-c,--config", config_file, "TOML config file (flags override it)");
  app.add_option("--data-dir", data_dir, "data directory (default ./data)");
  app.add_option("--bind", bind, "listen address (default 127.0.0.1)");
  app.add_option("--port", port, "listen port (default 10911; 0 = any free port)")
      ->check(CLI::Range(0, 65535));
  CLI::Option* grpc_port_opt = app.add_option("--grpc-port", grpc_port,
                 "RocketMQ 5 gRPC endpoint port (default 8081; 0 = off), docs/rocketmq-compat.md")
      ->check(CLI::Range(0, 65535));
  app.add_option("--http-port", http_port,
                 "HTTP port: /metrics, /healthz, /readyz, the console (default 9464; 0 = off), "
                 "docs/metrics.md")
      ->check(CLI::Range(0, 65535));
  std::string grpc_push_lease = "60s", grpc_auto_renew_max = "3h";
  app.add_option("--grpc-push-lease", grpc_push_lease,
                 "lease of a RocketMQ PushConsumer's message, renewed by the broker (default 60s)");
  app.add_option("--grpc-auto-renew-max", grpc_auto_renew_max,
                 "stop renewing a PushConsumer's lease this long after the receive (default 3h; "
                 "0s = no renewal)");
  app.add_option("--port-file", port_file, "write the bound port to this file once listening");
  app.add_flag("--manual-clock", manual_clock,
               "run on a manual clock moved only by the admin advance-clock request (tests)");
  app.add_option("--manual-clock-start-ms", manual_start_ms,
                 "initial manual clock time, ms since epoch (default: system time)");
  app.add_option("--flush", flush, "commit log flush: async (default) or sync")
      ->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--timer-precision", precision, "timer wheel tick, e.g. 100ms or 1s");
  int broker_id = -1;
  std::string replicate_from, replication;
  app.add_option("--broker-id", broker_id,
                 "id in the broker group: 0 leads by configuration, others follow "
                 "--replicate-from (docs/replication.md)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--replicate-from", replicate_from, "HOST:PORT of the group's leader (followers)");
  bool deposed = false;
  std::string rejoin_from;
  app.add_flag("--deposed", deposed,
               "start as a follower whatever the broker id (a deposed leader restarts itself "
               "with it; docs/replication.md \"Deposed leaders\")");
  app.add_option("--rejoin-from", rejoin_from,
                 "HOST:PORT whose term history the CommitLog is checked against (and cut to) at "
                 "start when --replicate-from is not given (cluster mode)");
  app.add_option("--replication", replication,
                 "async (default): sends answered after the leader's write; sync: after a "
                 "follower has them too")
      ->check(CLI::IsMember({"sync", "async"}));
  int64_t disk_min_free = -1;
  double disk_max_used_ratio = -1;
  std::string disk_check_interval;
  app.add_option("--disk-min-free", disk_min_free,
                 "refuse producer sends below this many free bytes on the data dir's disk "
                 "(default 0 = off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option(
         "--disk-max-used-ratio", disk_max_used_ratio,
         "refuse producer sends above this used fraction of the disk (default 0.9; 1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--disk-check-interval", disk_check_interval,
                 "how often free disk space is checked, e.g. 1s (default)");
  app.add_option("--max-open-files", max_open_files,
                 "ConsumeQueue files kept open at most (default 0: from the descriptor limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  bool auth = false;
  std::string auth_init_user;
  app.add_flag("--auth", auth,
               "require authentication and ACL permissions on both endpoints (docs/security.md)");
  app.add_option("--auth-init-user", auth_init_user,
                 "AK:SK created as a super user at start when no user exists (bootstrap)");
  std::string tls_cert, tls_key, tls_mode;
  app.add_option("--tls-cert", tls_cert, "PEM certificate chain for TLS on both ports");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  app.add_option("--tls-mode", tls_mode,
                 "disabled | permissive (TLS and plaintext) | enforcing (TLS only); default: "
                 "permissive with a certificate, else disabled")
      ->check(CLI::IsMember({"disabled", "permissive", "enforcing"}));
  bool replication_tls = false, no_replication_tls = false;
  std::string replication_tls_ca, replication_tls_server_name;
  app.add_flag("--replication-tls", replication_tls,
               "a follower connects to its leader with TLS (default: when --tls-mode is "
               "enforcing; docs/replication.md \"TLS between members\")");
  app.add_flag("--no-replication-tls", no_replication_tls,
               "a follower connects to its leader without TLS");
  app.add_option("--replication-tls-ca", replication_tls_ca,
                 "PEM CA file the leader's certificate must chain to (default: system CAs)");
  app.add_option("--replication-tls-server-name", replication_tls_server_name,
                 "name the leader's certificate must hold (default: the host of its address)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--log-file", log_file, "log to this file instead of stderr");
  app.add_option("--log-format", log_format, "text (default) or json: one JSON object per line")
      ->check(CLI::IsMember({"text", "json"}));
  std::string cluster_name, etcd_endpoints, broker_name, advertise, advertise_grpc;
  app.add_option("--cluster", cluster_name,
                 "join this cluster (docs/cluster.md); without it: a single node, no etcd");
  app.add_option("--etcd-endpoints", etcd_endpoints, "etcd client addresses, host:port[,...]");
  app.add_option("--broker-name", broker_name, "this broker's name in the cluster (unique)");
  app.add_option("--advertise", advertise,
                 "host:port clients reach the native port at (default: bind address + port)");
  int64_t lease_ttl_s = 0;
  app.add_option("--lease-ttl", lease_ttl_s,
                 "seconds: the etcd lease of the registration and of a group leader; a dead "
                 "leader is replaced within it (default 10)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--advertise-grpc", advertise_grpc,
                 "host:port clients reach the gRPC endpoint at (default: bind + --grpc-port)");
  CLI11_PARSE(app, argc, argv);

  BrokerConfig config;
  if (!config_file.empty()) {
    absl::Status s = tokimq::broker::LoadConfigFile(config_file, &config);
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  if (!data_dir.empty()) config.broker.data_dir = data_dir;
  if (!bind.empty()) config.server.bind_address = bind;
  if (port >= 0) config.server.port = static_cast<uint16_t>(port);
  if (!port_file.empty()) config.port_file = port_file;
  if (http_port >= 0) config.http_port = http_port;
  if (manual_clock) config.broker.manual_clock = true;
  if (manual_start_ms > 0) config.broker.manual_clock_start_ms = manual_start_ms;
  if (broker_id >= 0) config.broker.broker_id = broker_id;
  if (!replicate_from.empty()) config.broker.replicate_from = replicate_from;
  if (!replication.empty()) {
    config.broker.replication_sync = replication == "sync";
    config.broker.replication_explicit = true;  // a group member, even a lone async leader
  }
  if (deposed) config.broker.replication_deposed = true;
  if (!rejoin_from.empty()) config.broker.rejoin_from = rejoin_from;
  if (flush == "sync") config.broker.flush_mode = tokimq::FlushMode::kSync;
  if (flush == "async") config.broker.flush_mode = tokimq::FlushMode::kAsync;
  if (!precision.empty()) {
    auto ms = tokimq::ParseDuration(precision);
    if (!ms.ok() || *ms <= 0) return Fail("bad --timer-precision " + precision);
    config.broker.timer_precision_ms = *ms;
  }
  if (disk_min_free >= 0) config.broker.disk_min_free_bytes = static_cast<uint64_t>(disk_min_free);
  if (disk_max_used_ratio >= 0) {
    if (disk_max_used_ratio == 0) return Fail("--disk-max-used-ratio must be in (0, 1]");
    config.broker.disk_max_used_ratio = disk_max_used_ratio;
  }
  if (!disk_check_interval.empty()) {
    auto ms = tokimq::ParseDuration(disk_check_interval);
    if (!ms.ok() || *ms <= 0) return Fail("bad --disk-check-interval " + disk_check_interval);
    config.broker.disk_check_interval_ms = *ms;
  }
  auto push_lease = tokimq::ParseDuration(grpc_push_lease);
  if (!push_lease.ok() || *push_lease <= 0) return Fail("bad --grpc-push-lease " + grpc_push_lease);
  auto renew_max = tokimq::ParseDuration(grpc_auto_renew_max);
  if (!renew_max.ok() || *renew_max < 0) {
    return Fail("bad --grpc-auto-renew-max " + grpc_auto_renew_max);
  }
  if (max_open_files >= 0) config.broker.max_open_files = static_cast<size_t>(max_open_files);
  if (auth) config.broker.auth = true;
  if (!auth_init_user.empty()) config.broker.auth_init_user = auth_init_user;
  if (!tls_cert.empty()) config.server.tls_cert_file = tls_cert;
  if (!tls_key.empty()) config.server.tls_key_file = tls_key;
  if (!tls_mode.empty()) config.tls_mode = tls_mode;
  if (replication_tls && no_replication_tls) {
    return Fail("--replication-tls and --no-replication-tls exclude each other");
  }
  if (replication_tls) config.broker.replication_tls = true;
  if (no_replication_tls) config.broker.replication_tls = false;
  if (!replication_tls_ca.empty()) config.broker.replication_tls_ca_file = replication_tls_ca;
  if (!replication_tls_server_name.empty()) {
    config.broker.replication_tls_server_name = replication_tls_server_name;
  }
  if (absl::Status s = tokimq::broker::ResolveTls(&config); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (!cluster_name.empty()) config.cluster.cluster = cluster_name;
  if (!etcd_endpoints.empty()) {
    auto eps = tokimq::cluster::ParseEndpoints(etcd_endpoints);
    if (!eps.ok()) return Fail("--etcd-endpoints: " + std::string(eps.status().message()));
    config.cluster.etcd_endpoints = *eps;
  }
  if (!broker_name.empty()) config.cluster.broker_name = broker_name;
  if (!advertise.empty()) config.cluster.advertise = advertise;
  if (!advertise_grpc.empty()) config.cluster.advertise_grpc = advertise_grpc;
  if (lease_ttl_s > 0) config.cluster.lease_ttl_s = lease_ttl_s;
  if (config.cluster.enabled()) {
    // The etcd election decides who leads and whom followers pull from (docs/cluster.md).
    if (!config.broker.replicate_from.empty()) {
      return Fail("--replicate-from is for a static broker group; with --cluster the group's "
                  "leader is elected through etcd");
    }
    config.broker.replication_elected = true;
  }
  if (!log_level.empty()) config.log_level = log_level;
  if (!log_file.empty()) config.log_file = log_file;
  if (!log_format.empty()) config.log_format = log_format;

  try {
    if (!config.log_file.empty()) {
      spdlog::set_default_logger(spdlog::basic_logger_mt("tokimq", config.log_file));
    } else {
      spdlog::set_default_logger(spdlog::stderr_color_mt("tokimq"));
    }
  } catch (const spdlog::spdlog_ex& e) {
    return Fail(std::string("log: ") + e.what());
  }
  if (config.log_level != "off" &&
      spdlog::level::from_str(config.log_level) == spdlog::level::off) {
    return Fail("unknown log level '" + config.log_level +
                "' (trace, debug, info, warn, error, critical, off)");
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  if (config.log_format == "json") {
    spdlog::set_formatter(std::make_unique<tokimq::JsonLogFormatter>());
  }
  spdlog::flush_on(spdlog::level::info);

  config.broker.max_frame_bytes = config.server.max_frame_bytes;

  // Issue 25: raise the descriptor soft limit to the hard one, size the ConsumeQueue file
  // cache from it, and say what that holds.
  const tokimq::broker::NoFileLimit nofile = tokimq::broker::RaiseNoFileLimit();
  if (config.broker.max_open_files == 0) {
    config.broker.max_open_files = tokimq::broker::MaxOpenFilesFor(nofile.soft);
  } else if (const size_t fit = tokimq::broker::ClampMaxOpenFiles(config.broker.max_open_files,
                                                                   nofile.soft);
             fit < config.broker.max_open_files) {
    spdlog::warn("max_open_files {} does not fit the descriptor limit {}: using {}",
                 config.broker.max_open_files, nofile.soft, fit);
    config.broker.max_open_files = fit;
  }
  spdlog::info("{}", tokimq::broker::DescribeBudget(nofile, config.broker.max_open_files));

  if (!config.broker.auth && !tokimq::broker::IsLoopbackBind(config.server.bind_address)) {
    spdlog::warn("bound to {} with auth off: anyone who reaches the ports may send, consume and "
                 "delete topics (start with --auth, docs/security.md)",
                 config.server.bind_address);
  }
  // Files the broker creates (the metadata RocksDB holding secret keys, messages, logs) are
  // readable by its own user only: 0600 / 0700 (issue 17, docs/security.md).
  ::umask(077);
  // The HTTP port first, so /healthz answers (and /readyz says 503) while recovery runs.
  std::unique_ptr<tokimq::http::HttpEndpoint> http;
  if (config.http_port != 0) {
    tokimq::http::HttpServerOptions http_options;
    http_options.bind_address = config.server.bind_address;
    http_options.port = static_cast<uint16_t>(config.http_port < 0 ? 9464 : config.http_port);
    http = std::make_unique<tokimq::http::HttpEndpoint>(http_options);
    absl::Status s = http->Start();
    if (!s.ok() && config.http_port > 0) return Fail(s.ToString());  // asked for explicitly
    if (!s.ok()) {  // the default port is taken (e.g. another broker): carry on without it
      spdlog::error("HTTP port not started: {}", s.ToString());
      http.reset();
    } else {
      spdlog::info("HTTP port {}:{} (/metrics, /healthz, /readyz)", config.server.bind_address,
                   http->port());
    }
  }
  config.broker.on_restart = [](const std::string& leader, const std::string& reason) {
    {
      std::lock_guard<std::mutex> l(g_restart_mu);
      // A shutdown deposes a cluster leader too (it resigns): that is no reason to restart.
      if (g_restart || g_stopping) return;
      g_restart = true;
      g_restart_leader = leader;
    }
    spdlog::warn("restart requested ({}): stopping, then starting again as a follower", reason);
    ::kill(::getpid(), SIGTERM);
  };
  auto broker = tokimq::broker::Broker::Open(config.broker);
  if (!broker.ok()) return Fail(broker.status().ToString());
  if (http) {
    http->SetBroker(broker->get());
    // Routes of other components go here, once the Broker is open (issue 18 items 4-5: the
    // web console registers its pages and JSON API on http->router()).
    // ---- HTTP route hook: begin ----
    tokimq::broker::console::AddRoutes(http->router(), **broker);  // docs/console.md
    // ---- HTTP route hook: end ----
  }
  // Cluster mode: the etcd view and the request interceptor exist before the first request.
  std::unique_ptr<tokimq::broker::ClusterNode> cluster_node;
  int grpc_bound = 0;  // the gRPC endpoint's port once it listens
  if (config.cluster.enabled()) {
    auto node = tokimq::broker::ClusterNode::Create(broker->get(), config.cluster);
    if (!node.ok()) {
      (void)(*broker)->Close();
      return Fail(node.status().ToString());
    }
    cluster_node = std::move(*node);
  }
  tokimq::broker::Server server(broker->get(), config.server);
  absl::Status started = server.Start();
  if (!started.ok()) {
    if (http) http->Stop();
    (void)(*broker)->Close();
    return Fail(started.ToString());
  }
#if TOKIMQ_WITH_ROCKETMQ
  std::unique_ptr<tokimq::rocketmq::GrpcEndpoint> grpc_endpoint;
  if (grpc_port != 0) {
    tokimq::rocketmq::GrpcEndpointOptions grpc_options;
    grpc_options.address = config.server.bind_address;
    grpc_options.port = grpc_port;
    grpc_options.max_body_size = static_cast<int32_t>(config.broker.max_message_size);
    grpc_options.default_invisible_ms = *push_lease;
    grpc_options.auto_renew_max_ms = *renew_max;
    // Cluster mode: routes list every hosting broker at its own gRPC endpoint.
    if (cluster_node) grpc_options.cluster_broker_name = config.cluster.broker_name;
    if (config.server.tls_mode != tokimq::broker::TlsMode::kDisabled) {
      grpc_options.tls_cert_file = config.server.tls_cert_file;  // TLS only on gRPC
      grpc_options.tls_key_file = config.server.tls_key_file;
    }
    auto endpoint = tokimq::rocketmq::StartGrpcEndpoint(broker->get(), grpc_options);
    if (endpoint.ok()) {
      grpc_endpoint = std::move(*endpoint);
      grpc_bound = grpc_port;
    } else if (grpc_port_opt->count() > 0) {  // asked for explicitly: refuse to run without it
      server.Stop();
      if (http) http->Stop();
      (void)(*broker)->Close();
      return Fail(endpoint.status().ToString());
    } else {  // the default port is taken (e.g. another broker): carry on without it
      spdlog::error("RocketMQ gRPC endpoint not started: {}", endpoint.status().ToString());
    }
  }
#else
  (void)grpc_port_opt;
  if (grpc_port != 0) spdlog::warn("--grpc-port ignored: built without the RocketMQ endpoint");
#endif
  // Registered (or retrying while etcd is down) before the port file says "ready".
  if (cluster_node) {
    absl::Status joined = StartClusterNode(cluster_node.get(), config, server.port(), grpc_bound);
    if (!joined.ok()) {
      cluster_node.reset();
      server.Stop();
      (void)(*broker)->Close();
      return Fail(joined.ToString());
    }
  }
  if (!config.port_file.empty()) {
    std::string tmp = config.port_file + ".tmp";
    bool written = false;
    {
      std::ofstream out(tmp);
      out << server.port() << "\n";
      out.flush();
      written = static_cast<bool>(out);
    }
    if (!written || std::rename(tmp.c_str(), config.port_file.c_str()) != 0) {
      server.Stop();
      if (http) http->Stop();
      (void)(*broker)->Close();
      return Fail("cannot write --port-file " + config.port_file);
    }
  }
  if (http) http->SetReady(true);
  spdlog::info("tokimq-broker ready on {}:{} data dir {}{}", config.server.bind_address,
               server.port(), config.broker.data_dir,
               config.broker.manual_clock ? " (manual clock)" : "");

  int sig = 0;
  sigwait(&stop_signals, &sig);
  bool restart = false;
  std::string leader;
  {
    std::lock_guard<std::mutex> l(g_restart_mu);
    g_stopping = true;
    restart = g_restart;
    leader = g_restart_leader;
  }
  spdlog::info("signal {}: shutting down{}", sig, restart ? " to restart" : "");
  if (cluster_node) cluster_node->Stop();  // leaves every route at once (lease revoked)
  if (http) http->SetReady(false);
  (*broker)->StopLongPolls();  // else the servers wait for open long polls (up to 20 s)
#if TOKIMQ_WITH_ROCKETMQ
  if (grpc_endpoint) grpc_endpoint->Shutdown();
#endif
  server.Stop();
  if (http) http->Stop();  // its handlers call the Broker
  absl::Status closed = (*broker)->Close();
  if (restart && !g_cluster_conflict.load()) {
    // The stores are closed (or closed as far as they could be: the start recovers the rest).
    if (!closed.ok()) spdlog::error("shutdown before the restart: {}", closed.ToString());
    const std::vector<std::string> args =
        tokimq::broker::RestartArgs(argc, argv, config.cluster.enabled(), server.port(), leader);
    spdlog::warn("restarting as a follower{}{}", leader.empty() ? "" : " of ", leader);
    spdlog::default_logger()->flush();
    tokimq::broker::ReExec(args);
    return Fail(std::string("restart: exec failed: ") + std::strerror(errno));
  }
  if (!closed.ok()) return Fail("shutdown: " + closed.ToString());
  spdlog::info("bye");
  if (g_cluster_conflict.load()) return Fail("broker name taken in the cluster (see the log)");
  return 0;
}
