// CommitLog / MessageStore append throughput next to the disk's own ceiling, in one run.
//
//   BM_PlainWrite/<n>            sequential write(2) of n-byte chunks, one fdatasync at the end
//                                (ceiling for async appends of n-byte records)
//   BM_PlainWriteFdatasync/<n>   write(2) + fdatasync per n-byte chunk (ceiling for one
//                                synchronous writer without group commit)
//   BM_CommitLogAppendAsync/<b>  CommitLog::Append of records with a b-byte body, kAsync
//   BM_MessageStorePutAsync/<b>  MessageStore::Put (append + ConsumeQueue dispatch), kAsync
//   BM_CommitLogSyncGroupCommit/threads:<n>  Append + WaitDurable from n writers, kSync
//
// Counters: records/s and MB/s (record bytes as stored, header included).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "commitlog/commit_log.h"
#include "commitlog/message_store.h"

namespace tokimq {
namespace {

std::string MakeTempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tokimq-bench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  return tmpl;
}

Message MakeMessage(size_t body) {
  Message m;
  m.topic = "bench";
  m.queue_id = 0;
  m.body.assign(body, 'x');
  return m;
}

void SetCounters(benchmark::State& state, int64_t records, int64_t bytes) {
  state.counters["records/s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsRate);
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
}

void BM_PlainWrite(benchmark::State& state) {
  const std::string dir = MakeTempDir();
  const size_t n = static_cast<size_t>(state.range(0));
  int fd = ::open((dir + "/plain").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string buf(n, 'x');
  int64_t records = 0;
  for (auto _ : state) {
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) state.SkipWithError("write");
    ++records;
  }
  ::fdatasync(fd);  // inside the timed region: the bytes are on disk when the run ends
  ::close(fd);
  SetCounters(state, records, records * static_cast<int64_t>(n));
  std::filesystem::remove_all(dir);
}

void BM_PlainWriteFdatasync(benchmark::State& state) {
  const std::string dir = MakeTempDir();
  const size_t n = static_cast<size_t>(state.range(0));
  int fd = ::open((dir + "/plain").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string buf(n, 'x');
  int64_t records = 0;
  for (auto _ : state) {
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) state.SkipWithError("write");
    ::fdatasync(fd);
    ++records;
  }
  ::close(fd);
  SetCounters(state, records, records * static_cast<int64_t>(n));
  std::filesystem::remove_all(dir);
}

void BM_CommitLogAppendAsync(benchmark::State& state) {
  const std::string dir = MakeTempDir();
  CommitLogOptions o;
  o.dir = dir;
  o.segment_size = uint64_t{256} << 20;
  o.flush_mode = FlushMode::kAsync;
  auto log = std::move(*CommitLog::Open(FileSystem::Default(), SystemClock::Default(), o));
  const Message proto = MakeMessage(static_cast<size_t>(state.range(0)));
  const int64_t rec = static_cast<int64_t>(proto.EncodedSize());
  state.SetLabel("record " + std::to_string(rec) + " B");
  int64_t records = 0;
  for (auto _ : state) {
    Message m = proto;
    if (!log->Append(&m).ok()) state.SkipWithError("append");
    ++records;
  }
  if (!log->Close().ok()) state.SkipWithError("close");
  SetCounters(state, records, records * rec);
  log.reset();
  std::filesystem::remove_all(dir);
}

void BM_MessageStorePutAsync(benchmark::State& state) {
  const std::string dir = MakeTempDir();
  MessageStoreOptions o;
  o.dir = dir;
  o.commitlog.segment_size = uint64_t{256} << 20;
  auto store = std::move(*MessageStore::Open(FileSystem::Default(), SystemClock::Default(), o));
  const Message proto = MakeMessage(static_cast<size_t>(state.range(0)));
  const int64_t rec = static_cast<int64_t>(proto.EncodedSize());
  int64_t records = 0;
  for (auto _ : state) {
    Message m = proto;
    m.queue_id = static_cast<int32_t>(records & 7);
    if (!store->Put(std::move(m)).ok()) state.SkipWithError("put");
    ++records;
  }
  if (!store->Close().ok()) state.SkipWithError("close");
  SetCounters(state, records, records * rec);
  store.reset();
  std::filesystem::remove_all(dir);
}

std::unique_ptr<CommitLog> g_sync_log;
std::string g_sync_dir;

void BM_CommitLogSyncGroupCommit(benchmark::State& state) {
  if (state.thread_index() == 0) {
    g_sync_dir = MakeTempDir();
    CommitLogOptions o;
    o.dir = g_sync_dir;
    o.segment_size = uint64_t{256} << 20;
    o.flush_mode = FlushMode::kSync;
    g_sync_log = std::move(*CommitLog::Open(FileSystem::Default(), SystemClock::Default(), o));
  }
  const Message proto = MakeMessage(100);
  const int64_t rec = static_cast<int64_t>(proto.EncodedSize());
  int64_t records = 0;
  for (auto _ : state) {
    Message m = proto;
    auto off = g_sync_log->Append(&m);
    if (!off.ok() || !g_sync_log->WaitDurable(*off + rec).ok()) state.SkipWithError("append");
    ++records;
  }
  SetCounters(state, records, records * rec);
  if (state.thread_index() == 0) {
    (void)g_sync_log->Close();
    g_sync_log.reset();
    std::filesystem::remove_all(g_sync_dir);
  }
}

// 167 and 1091 bytes are the stored sizes of the 100 B and 1 KiB records of topic "bench".
BENCHMARK(BM_PlainWrite)->Arg(167)->Arg(1091)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_CommitLogAppendAsync)->Arg(100)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_MessageStorePutAsync)->Arg(100)->Arg(1024)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_PlainWriteFdatasync)->Arg(167)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_CommitLogSyncGroupCommit)
    ->Threads(1)
    ->Threads(8)
    ->Threads(64)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace tokimq

BENCHMARK_MAIN();
