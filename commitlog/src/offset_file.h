// Small CRC-protected files that hold one offset: the CommitLog checkpoint, the clean-shutdown
// marker and the MessageStore dispatch checkpoint (grammar: docs/formats/storecheckpoint.md).
// Written atomically and durably (temp file, fsync, rename, directory fsync).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/file.h"

namespace tokimq {

// Persisted magics: never renumbered.
inline constexpr uint32_t kCommitLogCheckpointMagic = 0x50434C43;  // "CLCP"
inline constexpr uint32_t kCleanShutdownMagic = 0x4E4C4343;        // "CCLN"
inline constexpr uint32_t kStoreCheckpointMagic = 0x50435344;      // "DSCP"
inline constexpr uint32_t kOffsetFileVersion = 1;
inline constexpr size_t kOffsetFileSize = 20;

absl::Status WriteOffsetFile(FileSystem* fs, const std::string& path, uint32_t magic,
                             int64_t value);
// kNotFound if missing; kDataLoss if the contents do not verify.
absl::StatusOr<int64_t> ReadOffsetFile(FileSystem* fs, const std::string& path, uint32_t magic);

}  // namespace tokimq
