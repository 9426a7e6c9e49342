#include "replication/term_history.h"

#include <gtest/gtest.h>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file.h"
#include "test_util.h"

namespace tokimq::replication {
namespace {

PhysicalOffset P(int64_t offset) { return PhysicalOffset(offset); }

TEST(TermHistoryTest, OldLeaderAheadOfTheNewLeaderCutsAtTheNewTermsStart) {
  // A led term 0 and wrote to 1000; B had copied 900 when A died, led term 1 from 900.
  TermHistory a({{0, P(0)}});
  TermHistory b({{0, P(0)}, {1, P(900)}});
  EXPECT_EQ(a.ConsistentEnd(P(1000), b, P(1500)), P(900));
  // A shorter than the new term's start: nothing to cut.
  EXPECT_EQ(a.ConsistentEnd(P(800), b, P(1500)), P(800));
}

TEST(TermHistoryTest, DivergedBytesBelowTheLeadersEndAreFound) {
  // A wrote 1000..1200 in term 0 that B never had; B's term 1 from 1000 reached 5000.
  TermHistory a({{0, P(0)}});
  TermHistory b({{0, P(0)}, {1, P(1000)}});
  EXPECT_EQ(a.ConsistentEnd(P(1200), b, P(5000)), P(1000));
}

TEST(TermHistoryTest, LastCommonTermDecidesAfterSeveralFailovers) {
  TermHistory b({{0, P(0)}, {1, P(900)}});                // B led term 1 to 1600
  TermHistory a({{0, P(0)}, {1, P(900)}, {2, P(1500)}});  // A followed to 1500, then led term 2
  EXPECT_EQ(b.ConsistentEnd(P(1600), a, P(3000)), P(1500));
  // The same history: everything agrees.
  EXPECT_EQ(a.ConsistentEnd(P(3000), a, P(3000)), P(3000));
  // No common entry at all: nothing is known to agree.
  TermHistory other({{7, P(0)}});
  EXPECT_EQ(other.ConsistentEnd(P(500), a, P(3000)), P(0));
  // No history (a log from before history files): only the lengths compare.
  EXPECT_EQ(TermHistory().ConsistentEnd(P(500), a, P(300)), P(300));
  EXPECT_EQ(TermHistory().ConsistentEnd(P(200), a, P(300)), P(200));
}

TEST(TermHistoryTest, BeginTermDropsEntriesPastTheLogAndRefusesOlderTerms) {
  // Taken from a leader; this log ends at 1200.
  TermHistory h({{0, P(0)}, {1, P(900)}, {3, P(2000)}});
  ASSERT_TRUE(h.BeginTerm(4, P(1200)).ok());
  EXPECT_EQ(h.entries(), (std::vector<TermStart>{{0, P(0)}, {1, P(900)}, {4, P(1200)}}));
  ASSERT_TRUE(h.BeginTerm(4, P(1500)).ok());  // restart in the same term: unchanged
  EXPECT_EQ(h.entries().back(), (TermStart{4, P(1200)}));
  EXPECT_EQ(h.BeginTerm(2, P(1500)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.LastTerm(), 4);
}

TEST(TermHistoryTest, EncodingMatchesTheDocumentedExampleAndRoundTrips) {
  TermHistory h({{0, P(0)}, {1, P(900)}});
  std::string bytes = h.Encode();
  // docs/formats/term-history.md: magic, version, count, entries, CRC32C over all before it.
  ASSERT_EQ(bytes.size(), 12u + 2 * 16 + 4);
  EXPECT_EQ(bytes.substr(0, 4), std::string("TKHP"));
  EXPECT_EQ(DecodeFixed32(bytes.data() + 4), 1u);
  EXPECT_EQ(DecodeFixed32(bytes.data() + 8), 2u);
  EXPECT_EQ(DecodeFixed64(bytes.data() + 12 + 16), 1u);
  EXPECT_EQ(DecodeFixed64(bytes.data() + 12 + 24), 900u);
  EXPECT_EQ(DecodeFixed32(bytes.data() + 44), crc32c::Value(bytes.data(), 44));
  EXPECT_EQ(DecodeFixed32(bytes.data() + 44), 0x9db246b7u);  // the worked example
  auto back = TermHistory::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entries(), h.entries());
}

TEST(TermHistoryTest, CorruptFilesAreRefused) {
  const std::string good = TermHistory({{0, P(0)}, {1, P(900)}}).Encode();
  std::string bad_crc = good;
  bad_crc[20] ^= 1;
  EXPECT_EQ(TermHistory::Decode(bad_crc).status().code(), absl::StatusCode::kDataLoss);
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_EQ(TermHistory::Decode(good.substr(0, n)).status().code(), absl::StatusCode::kDataLoss)
        << "truncated at " << n;
  }
  std::string bad_len = good;
  bad_len[8] = 3;
  EXPECT_EQ(TermHistory::Decode(bad_len).status().code(), absl::StatusCode::kDataLoss);
  // Out of order (term 1 before term 0), with a valid CRC.
  std::string unordered = TermHistory({{1, P(0)}, {0, P(900)}}).Encode();
  EXPECT_EQ(TermHistory::Decode(unordered).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TermHistoryTest, StoreAndLoadThroughTheFileSystem) {
  ::tokimq::testing::TempDir dir;
  FileSystem* fs = FileSystem::Default();
  const std::string path = dir.Join("term_history");
  auto empty = LoadTermHistory(fs, path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  TermHistory h({{0, P(0)}, {2, P(4096)}});
  ASSERT_TRUE(StoreTermHistory(fs, path, h).ok());
  auto loaded = LoadTermHistory(fs, path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->entries(), h.entries());
}

}  // namespace
}  // namespace tokimq::replication
