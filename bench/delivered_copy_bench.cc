// Building the timer's delivered copies and encoding them as PutBatch does, both ways in one
// run: DeliveredCopy (properties as record bytes, one pass) against DeliveredCopyByMap (the
// std::map path it replaced, kept as its fallback). CPU only: no files, no clock reads.
//
//   <way>/<set>  builds, encodes (record::EncodedSize + EncodeTo into a reused buffer, as
//                CommitLogImpl::AppendLocked) and destroys a copy of each of kRecords
//                timer-topic records (100 B bodies). The table's time is per iteration
//                (kRecords copies); items_per_second counts copies.
//     way: map | bytes
//     set: bare     UNIQ_KEY only besides the timer properties (what tokimq-bench and
//                   timerstore_bench send)
//          keys+tag KEYS, TAGS, UNIQ_KEY, MSG_GROUP and two user properties
//
// After the table it prints, for each set, the bytes/map ratio of CPU time and ns per copy.
// Usage: delivered_copy_bench [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commitlog/record.h"
#include "delivered_copy.h"
#include "timerstore/timer_store.h"
#include "ratio_reporter.h"

namespace tokimq {
namespace {

constexpr size_t kRecords = 1024;
constexpr int64_t kNow = 1'700'000'100'000;

struct Corpus {
  std::vector<std::string> bytes;  // encoded timer-topic records
  std::vector<record::RecordView> views;
  std::vector<ScheduledUnit> units;
};

Corpus MakeCorpus(bool keys_and_tag) {
  Corpus c;
  c.bytes.resize(kRecords);
  c.views.resize(kRecords);
  c.units.resize(kRecords);
  for (size_t i = 0; i < kRecords; ++i) {
    const int64_t deliver = kNow - static_cast<int64_t>(i % 50);
    Message m;  // as RewriteForSchedule (timerstore/src/schedule_rewrite.h) leaves it
    m.topic = kTimerTopic;
    m.queue_id = 0;
    m.queue_offset = QueueOffset(static_cast<int64_t>(i));
    m.physical_offset = PhysicalOffset(static_cast<int64_t>(i) * 300);
    m.born_ms = kNow - 60'000;
    m.store_ms = kNow - 59'990;
    m.flags = kFlagIndexed;
    m.properties[prop::kMessageId] = "0A0B0C0D0E0F" + std::to_string(1'000'000 + i);
    m.properties[prop::kDeliverMs] = std::to_string(deliver);
    m.properties[prop::kRealTopic] = "orders-delayed";
    m.properties[prop::kRealQueueId] = std::to_string(i % 8);
    if (keys_and_tag) {
      m.properties[prop::kKeys] = "order-" + std::to_string(i);
      m.properties[prop::kTag] = "TagA";
      m.properties[prop::kMessageGroup] = "group-" + std::to_string(i % 16);
      m.properties["trace_id"] = "3f2c9a7d1e0b4c6f";
      m.properties["source"] = "checkout";
    }
    m.body.assign(100, 'x');
    record::Encode(m, &c.bytes[i]);
    if (!record::DecodeView(c.bytes[i], &c.views[i]).ok()) std::abort();
    ScheduledUnit& su = c.units[i];
    su.pos = TimerLogPosition(static_cast<int64_t>(i) * 72);
    su.unit.write_ms = kNow - 59'980;
    su.unit.deliver_ms = deliver;
    su.unit.physical_offset = m.physical_offset;
    su.unit.msg_size = static_cast<uint32_t>(c.bytes[i].size());
  }
  return c;
}

template <std::optional<Message> (*Build)(const record::RecordView&, const ScheduledUnit&, int64_t)>
void BM_Copy(benchmark::State& state, bool keys_and_tag) {
  const Corpus c = MakeCorpus(keys_and_tag);
  std::string buf;
  buf.reserve(kRecords * 512);
  int64_t copies = 0;
  for (auto _ : state) {
    buf.clear();
    for (size_t i = 0; i < kRecords; ++i) {
      std::optional<Message> m = Build(c.views[i], c.units[i], kNow);
      if (!m) {
        state.SkipWithError("record mismatch");
        return;
      }
      m->physical_offset = PhysicalOffset(static_cast<int64_t>(buf.size()));
      m->store_ms = kNow + 1;
      const size_t size = m->EncodedSize();
      const size_t old = buf.size();
      buf.resize(old + size);
      record::EncodeTo(*m, size, buf.data() + old);
    }
    benchmark::DoNotOptimize(buf.data());
    copies += static_cast<int64_t>(kRecords);
  }
  state.SetItemsProcessed(copies);
}


}  // namespace
}  // namespace tokimq

int main(int argc, char** argv) {
  using tokimq::BM_Copy;
  using tokimq::DeliveredCopy;
  using tokimq::DeliveredCopyByMap;
  const char* sets[] = {"bare", "keys+tag"};
  for (int s = 0; s < 2; ++s) {
    const bool keys_and_tag = s == 1;
    benchmark::RegisterBenchmark((std::string("map/") + sets[s]).c_str(),
                                 BM_Copy<DeliveredCopyByMap>, keys_and_tag);
    benchmark::RegisterBenchmark((std::string("bytes/") + sets[s]).c_str(), BM_Copy<DeliveredCopy>,
                                 keys_and_tag);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tokimq::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nbytes/map CPU time per copy (lower is better; same process, same corpus):\n");
  for (const char* set : sets) {
    auto m = reporter.cpu().find(std::string("map/") + set);
    auto b = reporter.cpu().find(std::string("bytes/") + set);
    if (m == reporter.cpu().end() || b == reporter.cpu().end() || m->second <= 0) continue;
    std::printf("  %-9s %.3f  (%.0f -> %.0f ns per copy)\n", set, b->second / m->second,
                m->second / tokimq::kRecords, b->second / tokimq::kRecords);
  }
  benchmark::Shutdown();
  return 0;
}
