// Compatibility header: the duration / timestamp helpers live in common/duration.h now (they
// have nothing to do with the protocol). Existing callers keep using tokimq::wire::ParseDuration
// etc.; new code should include "common/duration.h" and call tokimq::ParseDuration.
#pragma once

#include "common/duration.h"

namespace tokimq::wire {

using ::tokimq::FormatDuration;
using ::tokimq::FormatTimestamp;
using ::tokimq::ParseDuration;
using ::tokimq::ParseTimestamp;

}  // namespace tokimq::wire
