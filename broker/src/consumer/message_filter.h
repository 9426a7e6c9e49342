// The receive-time message filters of one request: a tag filter (tag_filter.h) and an optional
// SQL92 property filter (sql_filter.h). Used by the lease-based Receive and by Pull, so both
// APIs skip the same messages. Pure functions; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "commitlog/record.h"
#include "consumer/sql_filter.h"

namespace tokimq::consumer {

// Whether `m` passes `tag_filter` (against its TAGS property) and `sql` (null: none; against
// all of its properties, as RocketMQ's broker evaluates SQL92 filters).
bool PassesFilters(std::string_view tag_filter, const SqlFilter* sql, const record::RecordView& m);

// The SQL92 filter a request asks for: `sql92` false (filter type TAG) takes no expression
// (kInvalidArgument when `expression` is not empty) and gives null; true parses `expression`
// (kInvalidArgument "sql filter: ..." when it is refused).
absl::StatusOr<std::shared_ptr<const SqlFilter>> RequestSqlFilter(bool sql92,
                                                                  std::string_view expression);

}  // namespace tokimq::consumer
