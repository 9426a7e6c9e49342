// The send path's message building for a delayed send, both ways in one run (issue 21 item 1,
// round 3): the std::map main's broker built from the Send entry and rewrote for the timer
// topic (map), against EncodeSendProperties + RewriteForSchedule on the encoded section
// (bytes). CPU only: no files, no clock reads.
//
//   <way>/<set>  builds the Message of each of kEntries Send entries as PrepareSend does,
//                rewrites it for the timer topic, encodes its CommitLog record as PutBatch
//                does (EncodedSize + EncodeTo into a reused buffer) and destroys it. Time per
//                iteration (kEntries messages); items_per_second counts messages.
//     way: map | bytes
//     set: bare     no key, tag or properties: UNIQ_KEY + timer properties (tokimq-bench)
//          keys+tag KEYS, TAGS and two user properties
//
// After the table it prints, for each set, the bytes/map ratio of CPU time and ns per message,
// and the messages built in all (instructions per message: run one benchmark under
// valgrind --tool=callgrind --toggle-collect='*OneMessage*' and divide its total by that).
// Usage: send_properties_bench [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "commitlog/record.h"
#include "common/property_keys.h"
#include "proto/tokimq.pb.h"
#include "schedule_rewrite.h"
#include "send_properties.h"
#include "ratio_reporter.h"

namespace tokimq {
namespace {

constexpr size_t kEntries = 1024;
constexpr int64_t kNow = 1'700'000'100'000;

struct Corpus {
  std::vector<proto::SendEntry> entries;
  std::vector<std::string> ids;  // message ids (NextMessageId's shape: 28 hex digits)
};

Corpus MakeCorpus(bool keys_and_tag) {
  Corpus c;
  c.entries.resize(kEntries);
  for (size_t i = 0; i < kEntries; ++i) {
    proto::SendEntry& e = c.entries[i];
    e.set_topic("orders-delayed");
    e.set_body(std::string(100, 'x'));
    e.set_delay_ms(3'600'000);
    if (keys_and_tag) {
      e.set_key("order-" + std::to_string(i));
      e.set_tag("TagA");
      (*e.mutable_properties())["trace_id"] = "3f2c9a7d1e0b4c6f";
      (*e.mutable_properties())["source"] = "checkout";
    }
    c.ids.push_back("018bcfe9c3ff00c0ffee" + std::to_string(10'000'000 + i));
  }
  return c;
}

// As main's PrepareSend (broker/src/send_handler.cc before round 3).
void BuildByMap(const proto::SendEntry& e, const std::string& id, Message* m) {
  for (const auto& [k, v] : e.properties()) m->properties[k] = v;
  if (!e.key().empty()) m->properties[prop::kKeys] = e.key();
  if (!e.tag().empty()) m->properties[prop::kTag] = e.tag();
  m->properties[prop::kMessageId] = id;
}

void BuildByBytes(const proto::SendEntry& e, const std::string& id, Message* m) {
  broker::EncodeSendProperties(e, nullptr, id, &m->encoded_properties);
}

int64_t messages_built = 0;  // for instructions per message under callgrind (see main)

// One message, built, rewritten, encoded at the end of `buf` and destroyed. Not inlined, so
// `valgrind --tool=callgrind --toggle-collect='*OneMessage*'` counts exactly this.
template <void (*Build)(const proto::SendEntry&, const std::string&, Message*)>
[[gnu::noinline]] void OneMessage(const proto::SendEntry& e, const std::string& id,
                                  int32_t queue_id, std::string* buf) {
  Message m;
  m.topic = e.topic();
  m.queue_id = queue_id;
  m.born_ms = kNow;
  Build(e, id, &m);
  m.body = e.body();
  RewriteForSchedule(&m, kNow + e.delay_ms(), kNow);
  m.physical_offset = PhysicalOffset(static_cast<int64_t>(buf->size()));
  m.store_ms = kNow;
  const size_t size = m.EncodedSize();
  const size_t old = buf->size();
  buf->resize(old + size);
  record::EncodeTo(m, size, buf->data() + old);
  ++messages_built;
}

template <void (*Build)(const proto::SendEntry&, const std::string&, Message*)>
void BM_Send(benchmark::State& state, bool keys_and_tag) {
  const Corpus c = MakeCorpus(keys_and_tag);
  std::string buf;
  buf.reserve(kEntries * 512);
  int64_t n = 0;
  for (auto _ : state) {
    buf.clear();
    for (size_t i = 0; i < kEntries; ++i) {
      OneMessage<Build>(c.entries[i], c.ids[i], static_cast<int32_t>(i % 8), &buf);
    }
    benchmark::DoNotOptimize(buf.data());
    n += static_cast<int64_t>(kEntries);
  }
  state.SetItemsProcessed(n);
}


}  // namespace
}  // namespace tokimq

int main(int argc, char** argv) {
  using tokimq::BM_Send;
  using tokimq::BuildByBytes;
  using tokimq::BuildByMap;
  const char* sets[] = {"bare", "keys+tag"};
  for (int s = 0; s < 2; ++s) {
    const bool keys_and_tag = s == 1;
    benchmark::RegisterBenchmark((std::string("map/") + sets[s]).c_str(), BM_Send<BuildByMap>,
                                 keys_and_tag);
    benchmark::RegisterBenchmark((std::string("bytes/") + sets[s]).c_str(), BM_Send<BuildByBytes>,
                                 keys_and_tag);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  tokimq::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nbytes/map CPU time per message (lower is better; same process, same corpus):\n");
  for (const char* set : sets) {
    auto m = reporter.cpu().find(std::string("map/") + set);
    auto b = reporter.cpu().find(std::string("bytes/") + set);
    if (m == reporter.cpu().end() || b == reporter.cpu().end() || m->second <= 0) continue;
    std::printf("  %-9s %.3f  (%.0f -> %.0f ns per message)\n", set, b->second / m->second,
                m->second / tokimq::kEntries, b->second / tokimq::kEntries);
  }
  // Instructions per message: callgrind's total with --toggle-collect='*OneMessage*' over this.
  std::printf("messages built: %lld\n", static_cast<long long>(tokimq::messages_built));
  benchmark::Shutdown();
  return 0;
}
