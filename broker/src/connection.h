// Connection: the server's side of one native-protocol client connection (docs/protocol.md):
// reads frames from its ConnectionStream, answers the handshake and Authenticate itself, runs
// requests that never block on its I/O thread and hands the others to the server's workers,
// and writes the responses back in completion order (pipelining, matched by request id).
//
// Lifetime: shared (enable_shared_from_this); every pending asynchronous operation holds a
// reference. Created by the server's acceptor, started with Start(); it calls
// context.forget(this) once when it closes. Drain() is the first step of the server's stop.
//
// Thread-safety: every member is touched only on the connection's I/O thread (its io_context
// is run by that one thread); workers hand their answers back through Complete(), which posts
// to that thread. Back-pressure: at most options.max_in_flight_per_connection requests are
// outstanding; beyond that the connection stops reading until one completes.
#pragma once

#include <utility>  // before any boost/asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "broker/auth/connection_auth.h"
#include "broker/server.h"
#include "common/hand_off_batch.h"
#include "common/offsets.h"
#include "connection_stream.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {

class Broker;
class Connection;

// What a server shares with each of its connections. Set up before the first accept; outlives
// every connection (the server joins its I/O threads before it goes).
struct ConnectionContext {
  Broker* broker = nullptr;
  const ServerOptions* options = nullptr;
  boost::asio::ssl::context* tls = nullptr;     // nullptr: tls_mode is kDisabled
  boost::asio::thread_pool* workers = nullptr;  // where requests that may block run
  // Called once, on the connection's I/O thread, when the connection closes.
  std::function<void(Connection*)> forget;
};

// One request and its response, allocated on one arena (connection.cc).
struct Call;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `context` must outlive the connection; `io` is the io_context of `socket` (the one I/O
  // thread that runs every handler of this connection).
  Connection(const ConnectionContext* context, boost::asio::io_context* io,
             boost::asio::ip::tcp::socket socket);

  // Reads requests once the stream carries the protocol (plaintext, or TLS by the server's
  // mode: connection_stream.h). I/O thread.
  void Start();
  // Closes the stream at once (pending answers are dropped). I/O thread; idempotent.
  void Close();
  // First step of a shutdown (Server::Stop): read no more requests, answer the ones in flight
  // (a long poll ended by Broker::StopLongPolls is answered on its worker), then close. Closing
  // at once dropped those answers when the close ran before the worker's frame was written.
  // I/O thread.
  void Drain();
  auto executor() { return stream_.executor(); }

 private:
  void CloseIfDrained();
  // The read loop: header, then body, then the next header (unless paused or draining).
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  void OnBody(boost::system::error_code ec);
  // Requests answered on the I/O thread before any dispatch: the handshake, anything before
  // it (refused), Authenticate, and requests the connection's user may not make. False when
  // `req` is none of these.
  bool AnswerConnectionLevel(const proto::Request& req);
  void AnswerHandshake(const proto::Request& req);
  void AnswerAuthenticate(const proto::Request& req);
  // Hands a request that was not answered on the I/O thread to where it runs: inline when it
  // never blocks (TryInline), the group commit for a sync send, else a worker.
  void Dispatch(std::shared_ptr<Call> call);
  // A send: stored on the calling thread, answered when durable (Broker::HandleNoWait) without
  // holding the thread through the fsync, so sends from every connection share the group
  // commit's fsyncs instead of one per worker. The work guard keeps the pool's join
  // (Server::Stop) waiting until the answer was handed to the I/O thread. Any thread.
  void SendNoWait(std::shared_ptr<Call> call);
  // Hands a worker's answer to the connection's I/O thread. Any thread. On a thread with a
  // HandOffBatch open (the group commit's sync thread during a round) the answer joins the
  // batch's one task for this I/O thread (common/hand_off_batch.h): the answers of one round
  // reach each I/O thread in one post, each connection's in the order Complete was called.
  void Complete(std::string frame);
  // HandOffBatch::PostFn: posts `tasks` to the io_context `io` as one handler.
  static void PostCompletions(void* io, std::vector<HandOffBatch::Task> tasks);
  // The answer `frame` arrived on the I/O thread: write it, resume reading if paused.
  void Completed(std::string frame);
  // Requests that never block run here on the connection's I/O thread: the hand-off to a
  // worker and back costs two thread switches, more than an ack or a ready receive itself
  // (perf on `tokimq-bench --mode lease`: a quarter of broker CPU was scheduler time). Acks,
  // renewals and nacks are one unsynced RocksDB write; a receive is tried without its long
  // poll and goes to a worker only when nothing is ready (it may then wait). Sends are not
  // answered here: with flush = "async" they go to the workers, with "sync" OnBody stores them
  // and the group commit answers them (SendNoWait). Returns false (nothing answered) when the
  // request must go elsewhere; else *frame is the response.
  // Sync replication: *wait_end (0: none) is the CommitLog end a follower must hold before
  // *frame is answered (CompleteWhenReplicated).
  bool TryInline(Call* call, std::string* frame, PhysicalOffset* wait_end);
  // HandleToFrame inside a ReplicationService::DeferStateWaits scope: *wait_end is the
  // CommitLog end the answer waits for (0: answer now). Any thread.
  std::string HandleToFrameDeferred(Call* call, bool* empty_receive, PhysicalOffset* wait_end);
  // Answers `frame` (of request `id`, counted in in_flight_) once a follower holds `end`
  // (ReplicationService::WhenReplicated), or the wait's error (kUnavailable) with that id.
  // Any thread; the work guard keeps Server::Stop's join waiting as for SendNoWait.
  void CompleteWhenReplicated(uint64_t id, std::string frame, PhysicalOffset end);
  // The response frame for call's request. A receive asking for encoded properties is encoded
  // straight from the stored records (Broker::HandleReceiveFrame); anything else goes through
  // a proto::Response on the call's arena. *empty_receive (if given): the request was a receive
  // that succeeded with no message. Any thread.
  std::string HandleToFrame(Call* call, bool* empty_receive);
  // Answers `s` with request id 0 (about the connection, not a request) and closes after it.
  void FailAndClose(const absl::Status& s);
  // The frame of `resp`, or of an error response with its id when `resp` cannot be encoded;
  // empty if neither can (the connection is then closed). Any thread.
  static std::string EncodeResponse(const proto::Response& resp);
  void Enqueue(const proto::Response& resp) { EnqueueFrame(EncodeResponse(resp)); }
  void EnqueueFrame(std::string frame);
  void Write();
  std::string peer() const { return stream_.Peer(); }

  const ConnectionContext* context_;
  boost::asio::io_context* io_;  // the socket's; outlives the connection (server.cc)
  ConnectionStream stream_;
  // Written on this I/O thread by the handshake and Authenticate, before any request that
  // reads it is handed to a worker (the post orders the two).
  auth::ConnectionAuth auth_;
  char header_[wire::kFrameHeaderBytes] = {};
  std::unique_ptr<char[]> body_;  // the frame body being read
  size_t body_len_ = 0;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool close_after_write_ = false;
  bool draining_ = false;
  bool closed_ = false;
  bool handshaken_ = false;
  // HandshakeRequest.resource_namespace ("" : none): set by the first handshake on this I/O
  // thread before any request that reads it is handed to a worker (request_namespace.h).
  std::string namespace_;
  bool paused_ = false;
  int in_flight_ = 0;
};

}  // namespace tokimq::broker
