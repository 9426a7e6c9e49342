// Property keys as std::string objects built once. Message::properties is a
// std::map<std::string, std::string> without transparent comparison, so a look-up by a
// const char* builds a temporary string (heap-allocated for keys of 16+ characters) every time;
// the hot timer paths look up these keys once or twice per message. The strings are never
// destroyed: a timer thread still running while the process exits (a static destructor or an
// atexit handler closing the store) may still read them.
#pragma once

#include <string>

#include "commitlog/message.h"
#include "timerstore/timer_store.h"

namespace tokimq::timer_keys {

inline const std::string& DeliverMs() {
  static const std::string* const s = new std::string(prop::kDeliverMs);
  return *s;
}
inline const std::string& RealTopic() {
  static const std::string* const s = new std::string(prop::kRealTopic);
  return *s;
}
inline const std::string& RealQueueId() {
  static const std::string* const s = new std::string(prop::kRealQueueId);
  return *s;
}
inline const std::string& EnqueueMs() {
  static const std::string* const s = new std::string(prop::kTimerEnqueueMs);
  return *s;
}
inline const std::string& DequeueMs() {
  static const std::string* const s = new std::string(prop::kTimerDequeueMs);
  return *s;
}
inline const std::string& UnitPos() {
  static const std::string* const s = new std::string(prop::kTimerUnitPos);
  return *s;
}
inline const std::string& SourceOffset() {
  static const std::string* const s = new std::string(kTimerSourceOffset);
  return *s;
}
inline const std::string& RollCount() {
  static const std::string* const s = new std::string(prop::kTimerRollCount);
  return *s;
}
inline const std::string& DeleteOf() {
  static const std::string* const s = new std::string(kTimerDeleteOf);
  return *s;
}

}  // namespace tokimq::timer_keys
