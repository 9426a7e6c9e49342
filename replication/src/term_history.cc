#include "replication/term_history.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq::replication {
namespace {

constexpr uint32_t kMagic = 0x5048'4B54;  // "TKHP" little-endian: 54 4B 48 50
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxEntries = 1u << 20;

// The end of entry i of `e` in a log ending at `log_end`.
PhysicalOffset EndOf(const std::vector<TermStart>& e, size_t i, PhysicalOffset log_end) {
  return i + 1 < e.size() ? e[i + 1].start_offset : log_end;
}

}  // namespace

absl::Status TermHistory::BeginTerm(int64_t term, PhysicalOffset log_end) {
  while (!entries_.empty() && entries_.back().start_offset > log_end) entries_.pop_back();
  if (!entries_.empty()) {
    if (entries_.back().term == term) return absl::OkStatus();
    if (entries_.back().term > term) {
      return absl::FailedPreconditionError(absl::StrCat(
          "term ", term, " is older than the last term of the history (", LastTerm(), ")"));
    }
  }
  entries_.push_back({term, log_end});
  return absl::OkStatus();
}

PhysicalOffset TermHistory::ConsistentEnd(PhysicalOffset local_end, const TermHistory& leader,
                                          PhysicalOffset leader_end) const {
  if (entries_.empty()) return std::min(local_end, leader_end);
  const std::vector<TermStart>& theirs = leader.entries();
  for (size_t i = entries_.size(); i > 0; --i) {
    const TermStart& mine = entries_[i - 1];
    auto it = std::find(theirs.begin(), theirs.end(), mine);
    if (it == theirs.end()) continue;
    const size_t j = static_cast<size_t>(it - theirs.begin());
    return std::min({local_end, EndOf(entries_, i - 1, local_end), EndOf(theirs, j, leader_end)});
  }
  return PhysicalOffset(0);
}

std::string TermHistory::Encode() const {
  std::string out;
  PutFixed32(&out, kMagic);
  PutFixed32(&out, kVersion);
  PutFixed32(&out, static_cast<uint32_t>(entries_.size()));
  for (const TermStart& e : entries_) {
    PutFixed64(&out, static_cast<uint64_t>(e.term));
    PutFixed64(&out, static_cast<uint64_t>(e.start_offset.value()));
  }
  PutFixed32(&out, crc32c::Value(out));
  return out;
}

absl::StatusOr<TermHistory> TermHistory::Decode(std::string_view in) {
  Decoder d(in);
  uint32_t magic = 0, version = 0, n = 0;
  if (!d.GetFixed32(&magic) || !d.GetFixed32(&version) || !d.GetFixed32(&n)) {
    return absl::DataLossError("term history: short header");
  }
  if (magic != kMagic) return absl::DataLossError("term history: bad magic");
  if (version != kVersion) {
    return absl::DataLossError(absl::StrCat("term history: unknown version ", version));
  }
  if (n > kMaxEntries || d.remaining() != static_cast<size_t>(n) * 16 + 4) {
    return absl::DataLossError(absl::StrCat("term history: bad length for ", n, " entries"));
  }
  const size_t body = 12 + static_cast<size_t>(n) * 16;
  if (crc32c::Value(in.data(), body) != DecodeFixed32(in.data() + body)) {
    return absl::DataLossError("term history: CRC mismatch");
  }
  std::vector<TermStart> entries(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t term = 0, start = 0;
    d.GetFixed64(&term);
    d.GetFixed64(&start);
    entries[i] = {static_cast<int64_t>(term), PhysicalOffset(static_cast<int64_t>(start))};
    if (entries[i].term < 0 || entries[i].start_offset < PhysicalOffset(0) ||
        (i > 0 && (entries[i].term <= entries[i - 1].term ||
                   entries[i].start_offset < entries[i - 1].start_offset))) {
      return absl::DataLossError(absl::StrCat("term history: entry ", i, " out of order"));
    }
  }
  return TermHistory(std::move(entries));
}

absl::StatusOr<TermHistory> LoadTermHistory(FileSystem* fs, const std::string& path) {
  if (!fs->Exists(path)) return TermHistory();
  TOKIMQ_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(fs, path));
  auto h = TermHistory::Decode(bytes);
  if (!h.ok()) return absl::DataLossError(absl::StrCat(h.status().message(), " in ", path));
  return h;
}

absl::Status StoreTermHistory(FileSystem* fs, const std::string& path, const TermHistory& h) {
  return WriteFileAtomic(fs, path, h.Encode());
}

}  // namespace tokimq::replication
