#include "replication/group_state_record.h"

#include <algorithm>
#include <vector>

#include "common/coding.h"
#include "rocksdb/write_batch.h"

namespace tokimq::broker {
namespace {

constexpr char kGroupKeyPrefix[] = "group/";
constexpr uint8_t kOpPut = 1;
constexpr uint8_t kOpDelete = 2;
constexpr uint8_t kOpSnapshot = 3;  // first operation only: u32 part, u32 parts

bool IsGroupKey(std::string_view key) {
  return key.substr(0, sizeof(kGroupKeyPrefix) - 1) == kGroupKeyPrefix;
}

// Collects a WriteBatch's operations into the record body.
class Encoder : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    if (rocksdb::Status s = Check(cf, key); !s.ok()) return s;
    body_.push_back(static_cast<char>(kOpPut));
    PutLengthPrefixed(&body_, std::string_view(key.data(), key.size()));
    PutLengthPrefixed(&body_, std::string_view(value.data(), value.size()));
    ++count_;
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    if (rocksdb::Status s = Check(cf, key); !s.ok()) return s;
    body_.push_back(static_cast<char>(kOpDelete));
    PutLengthPrefixed(&body_, std::string_view(key.data(), key.size()));
    ++count_;
    return rocksdb::Status::OK();
  }
  // Anything else (merge, single delete, range delete, other column families): the handler's
  // defaults refuse it.

  std::string Finish(const std::optional<SnapshotPart>& snapshot) {
    std::string out(1, static_cast<char>(kGroupStateRecordVersion));
    PutFixed32(&out, count_ + (snapshot.has_value() ? 1 : 0));
    if (snapshot.has_value()) {
      out.push_back(static_cast<char>(kOpSnapshot));
      PutFixed32(&out, snapshot->part);
      PutFixed32(&out, snapshot->parts);
    }
    out.append(body_);
    return out;
  }
  uint32_t count() const { return count_; }

 private:
  static rocksdb::Status Check(uint32_t cf, const rocksdb::Slice& key) {
    if (cf != 0) return rocksdb::Status::InvalidArgument("group state: not the default family");
    if (!IsGroupKey(std::string_view(key.data(), key.size()))) {
      return rocksdb::Status::InvalidArgument("group state: key outside group/: " + key.ToString());
    }
    return rocksdb::Status::OK();
  }
  std::string body_;
  uint32_t count_ = 0;
};

}  // namespace

absl::StatusOr<std::string> EncodeGroupStateRecord(const rocksdb::WriteBatch& batch,
                                                   std::optional<SnapshotPart> snapshot) {
  Encoder e;
  rocksdb::Status s = batch.Iterate(&e);
  if (!s.ok()) return absl::InvalidArgumentError(s.ToString());
  if (snapshot.has_value() && snapshot->part >= snapshot->parts) {
    return absl::InvalidArgumentError("group state: snapshot part past its parts");
  }
  if (e.count() == 0 && !snapshot.has_value()) {
    return absl::InvalidArgumentError("group state: empty batch");
  }
  return e.Finish(snapshot);
}

absl::Status DecodeGroupStateRecord(std::string_view body, rocksdb::WriteBatch* out,
                                    std::optional<SnapshotPart>* snapshot) {
  auto bad = [](const char* what) {
    return absl::DataLossError(std::string("group-state record: ") + what);
  };
  Decoder d(body);
  std::string_view version;
  uint32_t count = 0;
  if (!d.GetBytes(1, &version) || !d.GetFixed32(&count)) return bad("truncated header");
  if (static_cast<uint8_t>(version[0]) != kGroupStateRecordVersion) return bad("unknown version");
  if (count == 0) return bad("no operation");
  // The count is not trusted before it is checked against the body: every put or delete takes
  // at least an op byte, a key length and the "group/" prefix; only the first operation may be
  // the 9-byte snapshot header (found by the group_state_record fuzzer: a 5-byte body asking
  // for 4 G operations).
  constexpr size_t kMinOpBytes = 1 + 4 + (sizeof(kGroupKeyPrefix) - 1);
  constexpr size_t kSnapshotOpBytes = 1 + 4 + 4;
  const size_t rest = d.remaining();
  const size_t max_ops =
      std::max(rest / kMinOpBytes,
               rest >= kSnapshotOpBytes ? 1 + (rest - kSnapshotOpBytes) / kMinOpBytes : size_t{0});
  if (count > max_ops) return bad("more operations than the body holds");
  struct Op {
    bool put;
    std::string_view key, value;
  };
  std::optional<SnapshotPart> part;
  std::vector<Op> ops;
  // No reservation from `count` (not checked yet against the body's length): each operation
  // takes at least 5 bytes, so the body bounds the vector.
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view op;
    if (!d.GetBytes(1, &op)) return bad("truncated operation");
    if (static_cast<uint8_t>(op[0]) == kOpSnapshot) {
      SnapshotPart p;
      if (i != 0) return bad("snapshot header not first");
      if (!d.GetFixed32(&p.part) || !d.GetFixed32(&p.parts)) return bad("truncated snapshot");
      if (p.part >= p.parts) return bad("snapshot part past its parts");
      part = p;
      continue;
    }
    Op o{};
    if (!d.GetLengthPrefixed(&o.key)) return bad("truncated operation");
    if (!IsGroupKey(o.key)) return bad("key outside group/");
    if (static_cast<uint8_t>(op[0]) == kOpPut) {
      o.put = true;
      if (!d.GetLengthPrefixed(&o.value)) return bad("truncated value");
    } else if (static_cast<uint8_t>(op[0]) != kOpDelete) {
      return bad("unknown operation");
    }
    ops.push_back(o);
  }
  if (d.remaining() != 0) return bad("trailing bytes");
  for (const Op& o : ops) {
    rocksdb::Status s = o.put ? out->Put(rocksdb::Slice(o.key.data(), o.key.size()),
                                         rocksdb::Slice(o.value.data(), o.value.size()))
                              : out->Delete(rocksdb::Slice(o.key.data(), o.key.size()));
    if (!s.ok()) return absl::InternalError("group-state record: " + s.ToString());
  }
  if (snapshot != nullptr) *snapshot = part;
  return absl::OkStatus();
}

}  // namespace tokimq::broker
