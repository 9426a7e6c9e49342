#include "replication/group_state_record.h"

#include <vector>

#include "common/coding.h"
#include "rocksdb/write_batch.h"

namespace tokimq::broker {
namespace {

constexpr char kGroupKeyPrefix[] = "group/";
constexpr uint8_t kOpPut = 1;
constexpr uint8_t kOpDelete = 2;

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

  std::string Finish() {
    std::string out(1, static_cast<char>(kGroupStateRecordVersion));
    PutFixed32(&out, count_);
    out.append(body_);
    return out;
  }
  uint32_t count() const { return count_; }

 private:
  static rocksdb::Status Check(uint32_t cf, const rocksdb::Slice& key) {
    if (cf != 0) return rocksdb::Status::InvalidArgument("group state: not the default family");
    if (!IsGroupKey(std::string_view(key.data(), key.size()))) {
      return rocksdb::Status::InvalidArgument("group state: key outside group/: " +
                                              key.ToString());
    }
    return rocksdb::Status::OK();
  }
  std::string body_;
  uint32_t count_ = 0;
};

}  // namespace

absl::StatusOr<std::string> EncodeGroupStateRecord(const rocksdb::WriteBatch& batch) {
  Encoder e;
  rocksdb::Status s = batch.Iterate(&e);
  if (!s.ok()) return absl::InvalidArgumentError(s.ToString());
  if (e.count() == 0) return absl::InvalidArgumentError("group state: empty batch");
  return e.Finish();
}

absl::Status DecodeGroupStateRecord(std::string_view body, rocksdb::WriteBatch* out) {
  auto bad = [](const char* what) {
    return absl::DataLossError(std::string("group-state record: ") + what);
  };
  Decoder d(body);
  std::string_view version;
  uint32_t count = 0;
  if (!d.GetBytes(1, &version) || !d.GetFixed32(&count)) return bad("truncated header");
  if (static_cast<uint8_t>(version[0]) != kGroupStateRecordVersion) return bad("unknown version");
  if (count == 0) return bad("no operation");
  // The count is not trusted before it is checked against the body: every operation takes at
  // least an op byte, a key length and the "group/" prefix (found by the group_state_record
  // fuzzer: a 5-byte body asking for 4 G operations).
  constexpr size_t kMinOpBytes = 1 + 4 + (sizeof(kGroupKeyPrefix) - 1);
  if (count > d.remaining() / kMinOpBytes) return bad("more operations than the body holds");
  struct Op {
    bool put;
    std::string_view key, value;
  };
  std::vector<Op> ops;
  ops.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view op;
    Op o{};
    if (!d.GetBytes(1, &op) || !d.GetLengthPrefixed(&o.key)) return bad("truncated operation");
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
  return absl::OkStatus();
}

}  // namespace tokimq::broker
