#include "offset_file.h"

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace tokimq {

absl::Status WriteOffsetFile(FileSystem* fs, const std::string& path, uint32_t magic,
                             int64_t value) {
  std::string buf;
  PutFixed32(&buf, magic);
  PutFixed32(&buf, kOffsetFileVersion);
  PutFixed64(&buf, static_cast<uint64_t>(value));
  PutFixed32(&buf, crc32c::Value(buf));
  return WriteFileAtomic(fs, path, buf);
}

absl::StatusOr<int64_t> ReadOffsetFile(FileSystem* fs, const std::string& path, uint32_t magic) {
  if (!fs->Exists(path)) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  TOKIMQ_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(fs, path));
  if (data.size() != kOffsetFileSize || DecodeFixed32(data.data()) != magic ||
      DecodeFixed32(data.data() + 4) != kOffsetFileVersion ||
      DecodeFixed32(data.data() + 16) != crc32c::Value(data.data(), 16)) {
    return absl::DataLossError(absl::StrCat(path, ": bad offset file"));
  }
  return static_cast<int64_t>(DecodeFixed64(data.data() + 8));
}

}  // namespace tokimq
