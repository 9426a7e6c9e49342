// tokimq-storage-demo: appends N 100-byte messages to a MessageStore, reads them all back
// through the ConsumeQueues verifying every byte, and prints both rates.
//
//   tokimq-storage-demo [--dir DIR] [--count N] [--queues Q] [--sync]
//
// Without --dir the store lives in a fresh temp directory that is removed afterwards.
// Exit status: 0 when every message came back intact, 1 on any mismatch or error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "commitlog/message_store.h"
#include "common/clock.h"

namespace {

std::string BodyFor(int64_t i) {
  // 100 bytes that depend on i, so a misplaced message is caught.
  std::string b(100, '\0');
  uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : b) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return b;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "storage demo FAILED: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int64_t count = 1'000'000;
  int queues = 4;
  bool sync = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--count" && i + 1 < argc) {
      count = std::atoll(argv[++i]);
    } else if (a == "--queues" && i + 1 < argc) {
      queues = std::atoi(argv[++i]);
    } else if (a == "--sync") {
      sync = true;
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--count N] [--queues Q] [--sync]\n", argv[0]);
      return 2;
    }
  }
  if (count <= 0 || queues <= 0) return Fail("--count and --queues must be positive");
  bool temp = dir.empty();
  if (temp) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tokimq-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Fail("mkdtemp");
    dir = tmpl;
  }
  tokimq::Clock* clock = tokimq::SystemClock::Default();
  tokimq::MessageStoreOptions opt;
  opt.dir = dir;
  opt.commitlog.segment_size = uint64_t{256} << 20;
  opt.commitlog.flush_mode = sync ? tokimq::FlushMode::kSync : tokimq::FlushMode::kAsync;
  auto store_or = tokimq::MessageStore::Open(tokimq::FileSystem::Default(), clock, opt);
  if (!store_or.ok()) return Fail(store_or.status().ToString());
  auto store = std::move(*store_or);

  const std::string topic = "demo";
  std::vector<int64_t> base(queues);
  for (int q = 0; q < queues; ++q) base[q] = store->MaxQueueOffset(topic, q).value();

  int64_t t0 = clock->NowMicros();
  for (int64_t i = 0; i < count; ++i) {
    tokimq::Message m;
    m.topic = topic;
    m.queue_id = static_cast<int32_t>(i % queues);
    m.born_ms = clock->NowMs();
    m.body = BodyFor(i);
    auto r = store->Put(std::move(m));
    if (!r.ok()) return Fail("put " + std::to_string(i) + ": " + r.status().ToString());
  }
  if (auto s = store->Flush(); !s.ok()) return Fail("flush: " + s.ToString());
  int64_t t1 = clock->NowMicros();

  int64_t read = 0;
  for (int q = 0; q < queues; ++q) {
    int64_t off = base[q];
    int64_t i = q;  // message i went to queue i % queues
    while (true) {
      auto batch = store->ReadQueue(topic, q, tokimq::QueueOffset(off), 1024);
      if (!batch.ok()) return Fail("read: " + batch.status().ToString());
      if (batch->empty()) break;
      for (const auto& m : *batch) {
        if (m.queue_offset != tokimq::QueueOffset(off)) return Fail("queue offset " + std::to_string(off));
        if (m.body != BodyFor(i)) return Fail("body of message " + std::to_string(i));
        ++off;
        i += queues;
        ++read;
      }
    }
  }
  int64_t t2 = clock->NowMicros();
  if (read != count) {
    return Fail("read " + std::to_string(read) + " of " + std::to_string(count) + " messages");
  }
  if (auto s = store->Close(); !s.ok()) return Fail("close: " + s.ToString());
  const int64_t bytes = store->commit_log()->MaxOffset().value();
  store.reset();
  if (temp) std::filesystem::remove_all(dir);

  auto rate = [](int64_t n, int64_t us) {
    return us > 0 ? static_cast<double>(n) * 1e6 / us : 0.0;
  };
  std::printf("appended %lld messages of 100 B (%s) in %.3f s: %.0f msg/s\n",
              static_cast<long long>(count), sync ? "sync" : "async", (t1 - t0) / 1e6,
              rate(count, t1 - t0));
  std::printf("read back and verified %lld messages in %.3f s: %.0f msg/s\n",
              static_cast<long long>(read), (t2 - t1) / 1e6, rate(read, t2 - t1));
  std::printf("commit log bytes: %lld\n", static_cast<long long>(bytes));
  return 0;
}
