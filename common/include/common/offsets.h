// The positions the storage hands around, each its own type (common/strong_int.h): a byte
// offset in the CommitLog, an entry index in a ConsumeQueue and a byte position in the
// TimerLog are all int64_t on disk and on the wire, and must not be taken for one another.
// Converted to and from int64_t only at the boundaries: on-disk codecs, the protocol, logs.
#pragma once

#include "common/strong_int.h"

namespace tokimq {

// Byte offset of a record in the CommitLog's one logical byte space (docs/formats/commitlog.md):
// the offset of its first byte; a distance between two is a number of bytes.
using PhysicalOffset = StrongOffset<struct PhysicalOffsetTag>;

// Index of an entry in one ConsumeQueue (topic, queue id): 0, 1, 2, ... in dispatch order
// (docs/formats/consumequeue.md); a distance between two is a number of entries.
using QueueOffset = StrongOffset<struct QueueOffsetTag>;

// Byte position of a unit in the TimerLog (docs/formats/timerlog.md): a multiple of the unit
// size (kTimerUnitSize); a distance between two is a number of bytes.
using TimerLogPosition = StrongOffset<struct TimerLogPositionTag>;

}  // namespace tokimq
