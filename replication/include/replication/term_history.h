// TermHistory: which term wrote which part of a replica's CommitLog (issue 20 item 5), like
// RocketMQ's epoch file (EpochFileCache: epoch -> start offset). Entry {term, start_offset}
// says: the leader of `term` appended from `start_offset` on, up to the next entry's start
// (or the log end for the last entry). A leader adds an entry when it takes a term; a follower
// takes its leader's entries once it checked that its own log agrees with them.
//
// Rejoin: a replica that led (or followed a leader that was deposed) may hold bytes the new
// leader does not have. ConsistentEnd finds the offset up to which both logs were written by
// the same terms (the last entry both histories hold, ended at the earlier of the two ends of
// that term), and the follower truncates there before it pulls (docs/replication.md "Rejoin").
//
// File (<data_dir>/replication/term_history): grammar in docs/formats/term-history.md,
// replaced atomically (temp file, fsync, rename, directory fsync). Value type; no threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/file.h"
#include "common/offsets.h"

namespace tokimq::replication {

struct TermStart {
  int64_t term = 0;
  PhysicalOffset start_offset;  // where the term's first record was appended
  bool operator==(const TermStart& o) const {
    return term == o.term && start_offset == o.start_offset;
  }
};

class TermHistory {
 public:
  TermHistory() = default;
  explicit TermHistory(std::vector<TermStart> entries) : entries_(std::move(entries)) {}

  const std::vector<TermStart>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // The newest term in the history; -1 when empty.
  int64_t LastTerm() const { return entries_.empty() ? -1 : entries_.back().term; }

  // This replica leads `term` from `log_end` on. Entries starting past `log_end` (taken from a
  // leader whose bytes this replica never received) are dropped first. Nothing changes when the
  // last entry is already `term` (a leader restarted in its term). kFailedPrecondition when
  // `term` is older than the last entry's.
  absl::Status BeginTerm(int64_t term, PhysicalOffset log_end);

  // The end (bytes) of the prefix of a log with this history and end `local_end` that a leader
  // with history `leader` and end `leader_end` also holds: for the last entry both histories
  // hold (same term, same start), the earlier of the two ends of that term. With no common
  // entry: 0, or min(local_end, leader_end) when this history is empty (a log written before
  // histories existed: only the lengths can be compared).
  PhysicalOffset ConsistentEnd(PhysicalOffset local_end, const TermHistory& leader,
                               PhysicalOffset leader_end) const;

  std::string Encode() const;
  // kDataLoss on bad magic, version, length, CRC, or entries not increasing in term and
  // non-decreasing in start.
  static absl::StatusOr<TermHistory> Decode(std::string_view in);

 private:
  std::vector<TermStart> entries_;  // terms strictly increasing, starts non-decreasing
};

// Loads `path`: an empty history when the file does not exist; errors as Decode (with the path).
absl::StatusOr<TermHistory> LoadTermHistory(FileSystem* fs, const std::string& path);
absl::Status StoreTermHistory(FileSystem* fs, const std::string& path, const TermHistory& h);

}  // namespace tokimq::replication
