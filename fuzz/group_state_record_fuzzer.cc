// Fuzz target: the group-state record decoder (broker/src/replication/group_state_record.h,
// docs/formats/group-state-record.md): the body of a tokimq_sys_group_state CommitLog record a
// follower replays into its RocksDB.
//
// The whole input is a record body (no checksum of its own, so no mode byte is needed).
// Properties:
//   - a body that decodes re-encodes (EncodeGroupStateRecord of the decoded batch) to the same
//     bytes: the decoder accepts exactly the encoder's language (strict: no trailing bytes,
//     count >= 1, only puts and deletes of "group/" keys);
//   - decoding into a batch that already holds an operation adds nothing on error, and on
//     success adds exactly the operations the record counts.
#include <rocksdb/write_batch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/coding.h"
#include "fuzz_check.h"
#include "replication/group_state_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokimq::broker;
  const std::string_view body = tokimq::fuzz::AsView(data, size);

  rocksdb::WriteBatch fresh;
  std::optional<SnapshotPart> part;
  const absl::Status decoded = DecodeGroupStateRecord(body, &fresh, &part);
  if (decoded.ok()) {
    FUZZ_CHECK(body.size() >= 5);
    // The count includes a snapshot header operation (docs/formats/group-state-record.md).
    FUZZ_CHECK(static_cast<uint32_t>(fresh.Count()) + (part.has_value() ? 1u : 0u) ==
               tokimq::DecodeFixed32(body.data() + 1));
    if (!part.has_value()) {
      absl::StatusOr<std::string> again = EncodeGroupStateRecord(fresh);
      FUZZ_CHECK(again.ok());
      FUZZ_CHECK(*again == body);
    }
  } else {
    FUZZ_CHECK(decoded.code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(fresh.Count() == 0);
  }

  // The same body appended to a batch that holds one operation already.
  rocksdb::WriteBatch used;
  FUZZ_CHECK(used.Put("group/before", "v").ok());
  const std::string before = used.Data();
  const absl::Status appended = DecodeGroupStateRecord(body, &used);
  FUZZ_CHECK(appended.code() == decoded.code());
  if (appended.ok()) {
    FUZZ_CHECK(used.Count() == 1 + fresh.Count());
  } else {
    FUZZ_CHECK(used.Data() == before);
  }
  return 0;
}
