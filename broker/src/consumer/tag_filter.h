// Tag filter: which messages a Receive with a tag filter takes (RocketMQ tag subscription
// expressions). Messages the filter refuses count as consumed for the group. Pure function;
// thread-safe.
#pragma once

#include <string_view>

namespace tokimq::consumer {

// "" or "*": everything. Else "a||b||c" (spaces around names ignored): the message's TAGS
// property must equal one of the names.
bool TagMatches(std::string_view filter, std::string_view tag);


}  // namespace tokimq::consumer
