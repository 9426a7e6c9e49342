// The receive fast path's encoder against protobuf's own serialization, byte for byte.
#include "receive_encoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "proto/framing.h"
#include "proto/tokimq.pb.h"

namespace tokimq::broker {
namespace {

// What the broker would have sent through proto::Response for the same fields.
std::string ProtoFrame(uint64_t id, const std::vector<ReceivedFields>& msgs) {
  proto::Response resp;
  resp.set_id(id);
  auto* receive = resp.mutable_receive();
  for (const ReceivedFields& f : msgs) {
    proto::ReceivedMessage* m = receive->add_messages();
    m->set_message_id(std::string(f.message_id));
    m->set_topic(std::string(f.topic));
    m->set_queue_id(f.queue_id);
    m->set_queue_offset(f.queue_offset);
    m->set_body(std::string(f.body));
    m->set_key(std::string(f.key));
    m->set_tag(std::string(f.tag));
    m->set_born_ms(f.born_ms);
    m->set_receipt_handle(std::string(f.receipt_handle));
    m->set_delivery_attempt(f.delivery_attempt);
    m->set_deliver_ms(f.deliver_ms);
    m->set_invisible_until_ms(f.invisible_until_ms);
    m->set_properties_encoded(std::string(f.properties_encoded));
  }
  auto frame = wire::EncodeFrame(resp, UINT32_MAX);
  EXPECT_TRUE(frame.ok()) << frame.status();
  return frame.ok() ? *frame : std::string();
}

TEST(ReceiveEncoderTest, TypicalMessageMatchesProtobuf) {
  const std::string props("\x07\x00\x00\x00UNIQ_KEY", 12);
  ReceivedFields f;
  f.message_id = "0A0B0C0D00000001";
  f.topic = "orders";
  f.queue_id = 3;
  f.queue_offset = 123456;
  f.body = "order 42 timed out";
  f.key = "order-42";
  f.tag = "timeout";
  f.born_ms = 1'764'547'200'000;
  f.receipt_handle = "01abcdef";
  f.delivery_attempt = 1;
  f.deliver_ms = 1'764'547'260'000;
  f.invisible_until_ms = 1'764'547'290'000;
  f.properties_encoded = props;
  const std::string got = EncodeReceiveFrame(77, {f, f});
  EXPECT_EQ(got, ProtoFrame(77, {f, f}));
  // And it parses back to the same values.
  proto::Response back;
  ASSERT_TRUE(wire::DecodeFrameBody(std::string_view(got).substr(wire::kFrameHeaderBytes), &back).ok());
  EXPECT_EQ(back.id(), 77u);
  ASSERT_EQ(back.receive().messages_size(), 2);
  EXPECT_EQ(back.receive().messages(1).body(), "order 42 timed out");
  EXPECT_EQ(back.receive().messages(1).properties_encoded(), props);
  EXPECT_EQ(back.receive().messages(0).invisible_until_ms(), 1'764'547'290'000);
}

// A receive that carried acks: their results follow the messages (ReceiveResponse field 2),
// as protobuf writes them.
TEST(ReceiveEncoderTest, AckResultsAfterTheMessagesMatchProtobuf) {
  ReceivedFields f;
  f.message_id = "0A0B";
  f.topic = "orders";
  f.queue_offset = 9;
  f.body = "b";
  f.receipt_handle = "01ab";
  f.delivery_attempt = 1;
  proto::ReceiveResponse acks;
  acks.add_ack_results();  // OK: code 0, empty
  acks.add_ack_results()->set_code(9);
  acks.mutable_ack_results(1)->set_message("receipt handle is stale");
  const std::string tail = acks.SerializeAsString();

  proto::Response want;
  want.set_id(12);
  auto* m = want.mutable_receive()->add_messages();
  m->set_message_id("0A0B");
  m->set_topic("orders");
  m->set_queue_offset(9);
  m->set_body("b");
  m->set_receipt_handle("01ab");
  m->set_delivery_attempt(1);
  *want.mutable_receive()->mutable_ack_results() = acks.ack_results();
  auto frame = wire::EncodeFrame(want, UINT32_MAX);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(EncodeReceiveFrame(12, {f}, tail), *frame);

  // No message, only the results (a receive that found nothing after its acks).
  proto::Response only;
  only.set_id(13);
  *only.mutable_receive()->mutable_ack_results() = acks.ack_results();
  auto only_frame = wire::EncodeFrame(only, UINT32_MAX);
  ASSERT_TRUE(only_frame.ok());
  const std::string got = EncodeReceiveFrame(13, {}, tail);
  EXPECT_EQ(got, *only_frame);
  proto::Response back;
  ASSERT_TRUE(
      wire::DecodeFrameBody(std::string_view(got).substr(wire::kFrameHeaderBytes), &back).ok());
  ASSERT_EQ(back.receive().ack_results_size(), 2);
  EXPECT_EQ(back.receive().ack_results(1).code(), 9);
}

TEST(ReceiveEncoderTest, EmptyAndDefaultsMatchProtobuf) {
  EXPECT_EQ(EncodeReceiveFrame(1, {}), ProtoFrame(1, {}));
  EXPECT_EQ(EncodeReceiveFrame(0, {}), ProtoFrame(0, {}));
  ReceivedFields zero;  // every field at its default: an empty submessage
  EXPECT_EQ(EncodeReceiveFrame(5, {zero}), ProtoFrame(5, {zero}));
  EXPECT_EQ(EncodeReceiveFrame(5, {zero}).size(), wire::kFrameHeaderBytes + 2 + 2 + 1 + 2);
}

TEST(ReceiveEncoderTest, VarintEdgesMatchProtobuf) {
  ReceivedFields f;
  f.queue_id = -1;  // int32 negative: ten bytes on the wire
  f.queue_offset = std::numeric_limits<int64_t>::max();
  f.born_ms = std::numeric_limits<int64_t>::min();
  f.delivery_attempt = std::numeric_limits<int32_t>::max();
  f.deliver_ms = 127;
  f.invisible_until_ms = 128;
  EXPECT_EQ(EncodeReceiveFrame(std::numeric_limits<uint64_t>::max(), {f}),
            ProtoFrame(std::numeric_limits<uint64_t>::max(), {f}));
  f.queue_id = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(EncodeReceiveFrame(300, {f}), ProtoFrame(300, {f}));
}

TEST(ReceiveEncoderTest, RandomMessagesMatchProtobuf) {
  std::mt19937_64 rng(20261201);
  auto str = [&](size_t max) {
    std::string s(rng() % (max + 1), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  auto num = [&]() -> int64_t {
    switch (rng() % 4) {
      case 0: return 0;
      case 1: return static_cast<int64_t>(rng() % 200);
      case 2: return -static_cast<int64_t>(rng() % 1000);
      default: return static_cast<int64_t>(rng());
    }
  };
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> keep;  // owns the bytes the views point into
    keep.reserve(64 * 8);
    std::vector<ReceivedFields> msgs(rng() % 8);
    for (ReceivedFields& f : msgs) {
      auto s = [&](size_t max) -> std::string_view { return keep.emplace_back(str(max)); };
      f.message_id = s(40);
      f.topic = s(20);
      f.queue_id = static_cast<int32_t>(num());
      f.queue_offset = num();
      f.body = s(round % 10 == 0 ? 70'000 : 300);  // 1-, 2- and 3-byte length prefixes
      f.key = s(10);
      f.tag = s(10);
      f.born_ms = num();
      f.receipt_handle = s(200);
      f.delivery_attempt = static_cast<int32_t>(num());
      f.deliver_ms = num();
      f.invisible_until_ms = num();
      f.properties_encoded = s(500);
    }
    const uint64_t id = rng() % 3 == 0 ? 0 : rng();
    ASSERT_EQ(EncodeReceiveFrame(id, msgs), ProtoFrame(id, msgs)) << "round " << round;
  }
}

}  // namespace
}  // namespace tokimq::broker
