// TcpStream: a small blocking TCP client with a read buffer, for the peer drivers of
// tokimq-bench (Redis RESP and beanstalkd's text protocol). Loopback benchmarking only.
// Thread-safety: none; one stream per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tokimq::bench {

class TcpStream {
 public:
  // "host:port"; kUnavailable if the connection fails.
  static absl::StatusOr<std::unique_ptr<TcpStream>> Connect(const std::string& addr);
  ~TcpStream();
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  absl::Status WriteAll(std::string_view data);
  // A line without its trailing "\r\n". kUnavailable on EOF.
  absl::Status ReadLine(std::string* line);
  // Exactly n bytes.
  absl::Status ReadExact(size_t n, std::string* out);

 private:
  explicit TcpStream(int fd) : fd_(fd) {}
  absl::Status Fill();

  int fd_;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace tokimq::bench
