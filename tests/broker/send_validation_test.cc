// ValidateSendEntry (broker/src/send_validation.h): the checks one Send entry must pass.
#include "send_validation.h"

#include <gtest/gtest.h>

#include <string>

#include "common/message_limits.h"

namespace tokimq::broker {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;
constexpr uint32_t kMaxBody = 10;

TopicConfig Topic(TopicType type) {
  TopicConfig t;
  t.name = "orders";
  t.type = type;
  t.max_delay_ms = 60'000;
  return t;
}

absl::Status Validate(const proto::SendEntry& e, TopicType type, int64_t* deliver_ms) {
  return ValidateSendEntry(e, Topic(type), kMaxBody, kNow, deliver_ms);
}

TEST(SendValidation, ImmediateEntryIsDeliveredNow) {
  proto::SendEntry e;
  e.set_body("0123456789");  // exactly the limit
  int64_t deliver = 0;
  ASSERT_TRUE(Validate(e, TopicType::kNormal, &deliver).ok());
  EXPECT_EQ(deliver, kNow);
}

TEST(SendValidation, BodyOverTheMaxMessageSizeIsRefusedWithBothSizes) {
  proto::SendEntry e;
  e.set_body("01234567890");
  int64_t deliver = 0;
  absl::Status s = Validate(e, TopicType::kNormal, &deliver);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "body of 11 bytes exceeds the max message size of 10 bytes");
}

TEST(SendValidation, DelayAddsToNowAndPastDeliverAtMeansNow) {
  proto::SendEntry e;
  e.set_delay_ms(60'000);  // exactly the topic's max delay
  int64_t deliver = 0;
  ASSERT_TRUE(Validate(e, TopicType::kDelay, &deliver).ok());
  EXPECT_EQ(deliver, kNow + 60'000);
  e.set_deliver_at_ms(kNow - 5'000);
  ASSERT_TRUE(Validate(e, TopicType::kDelay, &deliver).ok());
  EXPECT_EQ(deliver, kNow);
}

TEST(SendValidation, NegativeDelayAndDelayPastTheTopicMaxAreRefused) {
  proto::SendEntry e;
  int64_t deliver = 0;
  e.set_delay_ms(-1);
  EXPECT_EQ(Validate(e, TopicType::kDelay, &deliver).message(), "delay must be >= 0");
  e.set_delay_ms(60'001);
  EXPECT_EQ(Validate(e, TopicType::kDelay, &deliver).code(),
            absl::StatusCode::kInvalidArgument);
  e.set_deliver_at_ms(kNow + 60'001);
  EXPECT_EQ(Validate(e, TopicType::kDelay, &deliver).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SendValidation, TimerStoreAndMessageGroupPropertiesAreReserved) {
  for (const char* reserved : {"TIMER_DELETE_OF", "TIMER_SRC_OFFSET", "MSG_GROUP"}) {
    proto::SendEntry e;
    (*e.mutable_properties())[reserved] = "1";
    int64_t deliver = 0;
    absl::Status s = Validate(e, TopicType::kNormal, &deliver);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << reserved;
    EXPECT_NE(s.message().find(reserved), std::string_view::npos) << s;
  }
}

TEST(SendValidation, KeyOverItsLimitIsRefused) {
  proto::SendEntry e;
  e.set_key(std::string(kMaxKeyBytes + 1, 'k'));
  int64_t deliver = 0;
  EXPECT_EQ(Validate(e, TopicType::kNormal, &deliver).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SendValidation, FifoTopicTakesTheKeyAsGroupAndNeedsOne) {
  proto::SendEntry e;
  int64_t deliver = 0;
  EXPECT_EQ(Validate(e, TopicType::kFifo, &deliver).message(),
            "topic 'orders' is FIFO: a message needs a message group (or a key)");
  e.set_key("customer-7");
  EXPECT_TRUE(Validate(e, TopicType::kFifo, &deliver).ok());
  EXPECT_EQ(MessageGroupOf(e), "customer-7");
  e.set_message_group("g1");
  EXPECT_EQ(MessageGroupOf(e), "g1");
}

TEST(SendValidation, FifoGroupOverItsLimitOrWithControlCharactersIsRefused) {
  proto::SendEntry e;
  int64_t deliver = 0;
  e.set_message_group(std::string(kMaxMessageGroupBytes, 'g'));
  EXPECT_TRUE(Validate(e, TopicType::kFifo, &deliver).ok());
  e.set_message_group(std::string(kMaxMessageGroupBytes + 1, 'g'));
  EXPECT_EQ(Validate(e, TopicType::kFifo, &deliver).message(),
            "message group of 257 bytes exceeds 256 bytes");
  e.set_message_group("a\tb");
  EXPECT_EQ(Validate(e, TopicType::kFifo, &deliver).message(),
            "message group contains a control character");
}

TEST(SendValidation, MessageGroupOnANonFifoTopicIsRefused) {
  proto::SendEntry e;
  e.set_message_group("g1");
  int64_t deliver = 0;
  EXPECT_EQ(Validate(e, TopicType::kNormal, &deliver).message(),
            "topic 'orders' is NORMAL: message groups need a FIFO topic");
}

}  // namespace
}  // namespace tokimq::broker
