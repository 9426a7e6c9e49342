#include "consumer/message_filter.h"

#include "common/property_keys.h"
#include "consumer/tag_filter.h"

namespace tokimq::consumer {

bool PassesFilters(std::string_view tag_filter, const SqlFilter* sql,
                   const record::RecordView& m) {
  std::string_view tag;
  if (!m.FindProperty(prop::kTag, &tag)) tag = {};
  if (!TagMatches(tag_filter, tag)) return false;
  return sql == nullptr || sql->Matches([&](std::string_view name, std::string_view* value) {
           return m.FindProperty(name, value);
         });
}

absl::StatusOr<std::shared_ptr<const SqlFilter>> RequestSqlFilter(bool sql92,
                                                                  std::string_view expression) {
  if (!sql92) {
    if (!expression.empty()) {
      return absl::InvalidArgumentError(
          "filter_expression needs filter_type FILTER_SQL92 (tag filters go in tag_filter)");
    }
    return std::shared_ptr<const SqlFilter>();
  }
  absl::StatusOr<SqlFilter> parsed = SqlFilter::Parse(expression);
  if (!parsed.ok()) return parsed.status();
  return std::make_shared<const SqlFilter>(*std::move(parsed));
}

}  // namespace tokimq::consumer
