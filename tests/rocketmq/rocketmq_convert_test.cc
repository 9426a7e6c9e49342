// Unit tests of the RocketMQ endpoint's pure parts: status mapping, recall handles, digests,
// message views, the message-group rule of sends, the settings answer and the in-flight cache.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "commitlog/message.h"
#include "common/message_limits.h"
#include "convert.h"
#include "in_flight_cache.h"
#include "messaging_service.h"

namespace tokimq::rocketmq {
namespace {

proto::Status Native(absl::StatusCode code, const std::string& msg) {
  proto::Status s;
  s.set_code(static_cast<int32_t>(code));
  s.set_message(msg);
  return s;
}

TEST(ConvertTest, NativeErrorsMapToTheCodesClientsExpect) {
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kOk, ""), RpcKind::kSend), v2::Code::OK);
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kInvalidArgument,
                                  "delay 2h exceeds the max delay 1h of topic 't'"),
                           RpcKind::kSend),
            v2::Code::ILLEGAL_DELIVERY_TIME);
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kNotFound, "topic 't' does not exist"),
                           RpcKind::kRoute),
            v2::Code::TOPIC_NOT_FOUND);
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kFailedPrecondition, "handle used"),
                           RpcKind::kReceipt),
            v2::Code::INVALID_RECEIPT_HANDLE);
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kResourceExhausted, ""), RpcKind::kOther),
            v2::Code::TOO_MANY_REQUESTS);
  EXPECT_EQ(CodeFromNative(Native(absl::StatusCode::kInternal, "disk"), RpcKind::kSend),
            v2::Code::INTERNAL_ERROR);
}

TEST(ConvertTest, RecallHandleCarriesTheMessageId) {
  std::string id, native;
  const std::string h = EncodeRecallHandle("0102AB", "01c5deadbeef");
  EXPECT_EQ(h, "0102AB:01c5deadbeef");
  ASSERT_TRUE(DecodeRecallHandle(h, &id, &native));
  EXPECT_EQ(id, "0102AB");
  EXPECT_EQ(native, "01c5deadbeef");
  // A handle without the id (or an id with ':') passes through unchanged.
  EXPECT_EQ(EncodeRecallHandle("a:b", "01c5"), "01c5");
  EXPECT_FALSE(DecodeRecallHandle("01c5", &id, &native));
  EXPECT_EQ(native, "01c5");
  EXPECT_EQ(id, "");
}

TEST(ConvertTest, Md5IsUpperCaseHex) {
  EXPECT_EQ(Md5Hex(""), "D41D8CD98F00B204E9800998ECF8427E");
  EXPECT_EQ(Md5Hex("abc"), "900150983CD24FB0D6963F7D28E17F72");
}

TEST(ConvertTest, DurationsAndTimestampsRoundTripInMs) {
  google::protobuf::Duration d;
  SetDurationMs(15'250, &d);
  EXPECT_EQ(d.seconds(), 15);
  EXPECT_EQ(d.nanos(), 250'000'000);
  EXPECT_EQ(DurationMs(d), 15'250);
  google::protobuf::Timestamp t;
  SetTimestampMs(1'700'000'000'123, &t);
  EXPECT_EQ(TimestampMs(t), 1'700'000'000'123);
}

TEST(ConvertTest, ReceivedMessageViewHidesSystemPropertiesAndKeepsRocketFields) {
  proto::ReceivedMessage in;
  in.set_message_id("NATIVEID");
  in.set_topic("orders");
  in.set_queue_id(3);
  in.set_queue_offset(42);
  in.set_body("hello");
  in.set_key("k1 k2");
  in.set_tag("tagA");
  in.set_born_ms(1000);
  in.set_receipt_handle("rh");
  in.set_delivery_attempt(2);
  in.set_deliver_ms(5000);
  auto& p = *in.mutable_properties();
  p["user"] = "v";
  p["KEYS"] = "k1 k2";
  p["TAGS"] = "tagA";
  p["UNIQ_KEY"] = "NATIVEID";
  p["TIMER_DELIVER_MS"] = "4999";
  p[kRmqMessageId] = "CLIENTID";
  p[kRmqBornHost] = "host1";
  v2::Message out;
  ToRocketMessage(in, 15'000, &out);
  EXPECT_EQ(out.topic().name(), "orders");
  ASSERT_EQ(out.user_properties().size(), 1u);
  EXPECT_EQ(out.user_properties().at("user"), "v");
  const v2::SystemProperties& sp = out.system_properties();
  EXPECT_EQ(sp.message_id(), "CLIENTID");
  EXPECT_EQ(sp.tag(), "tagA");
  ASSERT_EQ(sp.keys_size(), 2);
  EXPECT_EQ(sp.keys(0), "k1");
  EXPECT_EQ(sp.keys(1), "k2");
  EXPECT_EQ(sp.message_type(), v2::MessageType::DELAY);
  EXPECT_EQ(TimestampMs(sp.delivery_timestamp()), 4999);
  EXPECT_EQ(TimestampMs(sp.born_timestamp()), 1000);
  EXPECT_EQ(sp.born_host(), "host1");
  EXPECT_EQ(sp.receipt_handle(), "rh");
  EXPECT_EQ(sp.delivery_attempt(), 2);
  EXPECT_EQ(sp.queue_id(), 3);
  EXPECT_EQ(sp.queue_offset(), 42);
  EXPECT_EQ(DurationMs(sp.invisible_duration()), 15'000);
  EXPECT_EQ(sp.body_digest().type(), v2::DigestType::MD5);
  EXPECT_EQ(sp.body_digest().checksum(), Md5Hex("hello"));
  EXPECT_EQ(out.body(), "hello");
}

TEST(ConvertTest, MessageGroupBecomesTheFifoGroupOfTheView) {
  proto::ReceivedMessage in;
  in.set_topic("orders_fifo");
  in.set_body("b");
  (*in.mutable_properties())["MSG_GROUP"] = "order-17";
  v2::Message out;
  ToRocketMessage(in, 1000, &out);
  EXPECT_EQ(out.system_properties().message_group(), "order-17");
  EXPECT_EQ(out.system_properties().message_type(), v2::MessageType::FIFO);
  // MSG_GROUP itself is a system property; RocketMQ's __SHARDINGKEY shows the group.
  ASSERT_EQ(out.user_properties().size(), 1u);
  EXPECT_EQ(out.user_properties().at("__SHARDINGKEY"), "order-17");

  proto::ReceivedMessage plain;
  plain.set_topic("orders");
  v2::Message plain_out;
  ToRocketMessage(plain, 1000, &plain_out);
  EXPECT_FALSE(plain_out.system_properties().has_message_group());
  EXPECT_EQ(plain_out.system_properties().message_type(), v2::MessageType::NORMAL);
  EXPECT_EQ(plain_out.user_properties().count("__SHARDINGKEY"), 0u);
}

proto::TopicConfig Topic(const std::string& name, proto::TopicType type) {
  proto::TopicConfig t;
  t.set_name(name);
  t.set_type(type);
  t.set_queues(4);
  return t;
}

v2::SystemProperties Props(std::optional<std::string> group,
                           v2::MessageType type = v2::MessageType::MESSAGE_TYPE_UNSPECIFIED) {
  v2::SystemProperties sp;
  if (group) sp.set_message_group(*group);
  sp.set_message_type(type);
  return sp;
}

TEST(MessageGroupTest, FifoMessageOnFifoTopicIsAccepted) {
  const proto::TopicConfig fifo = Topic("f", proto::FIFO);
  EXPECT_EQ(CheckMessageGroup(Props("g1", v2::MessageType::FIFO), fifo).code(), v2::Code::OK);
  // The group decides, as in RocketMQ's proxy, whatever type the client put.
  EXPECT_EQ(CheckMessageGroup(Props("g1"), fifo).code(), v2::Code::OK);
  EXPECT_EQ(CheckMessageGroup(Props(std::string(kMaxMessageGroupBytes, 'g')), fifo).code(),
            v2::Code::OK);
}

TEST(MessageGroupTest, TypeMismatchIsPropertyConflictWithType) {
  const v2::Status fifo_on_normal =
      CheckMessageGroup(Props("g1", v2::MessageType::FIFO), Topic("n", proto::NORMAL));
  EXPECT_EQ(fifo_on_normal.code(), v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
  EXPECT_NE(fifo_on_normal.message().find("'n' is a normal topic"), std::string::npos)
      << fifo_on_normal.message();
  EXPECT_EQ(CheckMessageGroup(Props("g1"), Topic("d", proto::DELAY)).code(),
            v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
  const v2::Status plain_on_fifo =
      CheckMessageGroup(Props(std::nullopt, v2::MessageType::NORMAL), Topic("f", proto::FIFO));
  EXPECT_EQ(plain_on_fifo.code(), v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
  EXPECT_NE(plain_on_fifo.message().find("need a message group"), std::string::npos)
      << plain_on_fifo.message();
  EXPECT_EQ(CheckMessageGroup(Props(std::nullopt), Topic("n", proto::NORMAL)).code(), v2::Code::OK);
}

TEST(MessageGroupTest, MalformedGroupIsIllegalMessageGroup) {
  const proto::TopicConfig fifo = Topic("f", proto::FIFO);
  EXPECT_EQ(CheckMessageGroup(Props(std::nullopt, v2::MessageType::FIFO), fifo).code(),
            v2::Code::ILLEGAL_MESSAGE_GROUP);
  EXPECT_EQ(CheckMessageGroup(Props(""), fifo).code(), v2::Code::ILLEGAL_MESSAGE_GROUP);
  EXPECT_EQ(CheckMessageGroup(Props(std::string(kMaxMessageGroupBytes + 1, 'g')), fifo).code(),
            v2::Code::ILLEGAL_MESSAGE_GROUP);
  EXPECT_EQ(CheckMessageGroup(Props("a\nb"), fifo).code(), v2::Code::ILLEGAL_MESSAGE_GROUP);
}

TEST(MessageGroupTest, SendEntryCarriesTheGroup) {
  GrpcEndpointOptions o;
  MessagingServiceImpl svc(nullptr, o);
  v2::Message m;
  m.mutable_topic()->set_name("f");
  m.set_body("x");
  m.mutable_system_properties()->set_message_id("ID1");
  m.mutable_system_properties()->set_message_type(v2::MessageType::FIFO);
  m.mutable_system_properties()->set_message_group("order-17");
  m.mutable_system_properties()->add_keys("k1");
  proto::SendEntry e;
  ASSERT_EQ(svc.PrepareSendEntry(m, Topic("f", proto::FIFO), 0, &e).code(), v2::Code::OK);
  EXPECT_EQ(e.message_group(), "order-17");
  EXPECT_EQ(e.key(), "k1");  // the key stays a key; it does not pick the group

  // tokimq extension: a delayed FIFO message (the official clients refuse to build one).
  SetTimestampMs(5'000, m.mutable_system_properties()->mutable_delivery_timestamp());
  proto::SendEntry delayed;
  ASSERT_EQ(svc.PrepareSendEntry(m, Topic("f", proto::FIFO), 1'000, &delayed).code(),
            v2::Code::OK);
  EXPECT_EQ(delayed.message_group(), "order-17");
  EXPECT_EQ(delayed.deliver_at_ms(), 5'000);

  proto::SendEntry refused;
  EXPECT_EQ(svc.PrepareSendEntry(m, Topic("n", proto::NORMAL), 0, &refused).code(),
            v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
  m.mutable_system_properties()->set_message_type(v2::MessageType::TRANSACTION);
  EXPECT_EQ(svc.PrepareSendEntry(m, Topic("f", proto::FIFO), 0, &refused).code(),
            v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
}

// Transactions (docs/transactions.md): TRANSACTION messages on TRANSACTION topics only, with
// the orphan recovery duration as the half's check immunity.
TEST(TransactionRpcTest, TransactionalSendMapsToAHalf) {
  GrpcEndpointOptions o;
  MessagingServiceImpl svc(nullptr, o);
  v2::Message m;
  m.mutable_topic()->set_name("tx");
  m.set_body("b");
  m.mutable_system_properties()->set_message_id("RMQ-ID-1");
  m.mutable_system_properties()->set_message_type(v2::MessageType::TRANSACTION);
  SetDurationMs(9'000,
                m.mutable_system_properties()->mutable_orphaned_transaction_recovery_duration());
  proto::SendEntry e;
  ASSERT_EQ(svc.PrepareSendEntry(m, Topic("tx", proto::TRANSACTION), 0, &e).code(), v2::Code::OK);
  EXPECT_TRUE(e.transactional());
  EXPECT_EQ(e.check_immunity_ms(), 9'000);
  proto::SendEntry refused;
  EXPECT_EQ(svc.PrepareSendEntry(m, Topic("n", proto::NORMAL), 0, &refused).code(),
            v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
  m.mutable_system_properties()->set_message_type(v2::MessageType::NORMAL);
  EXPECT_EQ(svc.PrepareSendEntry(m, Topic("tx", proto::TRANSACTION), 0, &refused).code(),
            v2::Code::MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
}

TEST(TransactionRpcTest, TransactionIdCarriesTheNativeMessageId) {
  std::string id = MessagingServiceImpl::EncodeTransactionId("NATIVE1", "TX9");
  EXPECT_EQ(id, "NATIVE1:TX9");
  std::string msg, tx;
  ASSERT_TRUE(MessagingServiceImpl::DecodeTransactionId(id, &msg, &tx));
  EXPECT_EQ(msg, "NATIVE1");
  EXPECT_EQ(tx, "TX9");
  EXPECT_FALSE(MessagingServiceImpl::DecodeTransactionId("no-separator", &msg, &tx));
  EXPECT_FALSE(MessagingServiceImpl::DecodeTransactionId(":TX9", &msg, &tx));
}

// The Node.js client ignores a RecoverOrphanedTransactionCommand whose message has no
// body_digest; the message id it answers with is its own (the __RMQ_MSG_ID property).
TEST(TransactionRpcTest, RecoverCommandCarriesFullSystemProperties) {
  proto::TransactionCheck c;
  c.set_topic("tx");
  c.set_message_id("NATIVE1");
  c.set_transaction_id("TX9");
  c.set_body("hello");
  c.set_key("k1 k2");
  c.set_tag("t");
  (*c.mutable_properties())[kRmqMessageId] = "RMQ-ID-1";
  (*c.mutable_properties())["user"] = "v";
  v2::TelemetryCommand cmd = MessagingServiceImpl::RecoverCommand(c);
  ASSERT_TRUE(cmd.has_recover_orphaned_transaction_command());
  const auto& rc = cmd.recover_orphaned_transaction_command();
  EXPECT_EQ(rc.transaction_id(), "NATIVE1:TX9");
  const v2::SystemProperties& sp = rc.message().system_properties();
  EXPECT_EQ(sp.message_id(), "RMQ-ID-1");
  EXPECT_EQ(sp.message_type(), v2::MessageType::TRANSACTION);
  EXPECT_EQ(sp.body_digest().type(), v2::DigestType::MD5);
  EXPECT_EQ(sp.body_digest().checksum(), Md5Hex("hello"));
  EXPECT_EQ(sp.tag(), "t");
  ASSERT_EQ(sp.keys_size(), 2);
  EXPECT_EQ(rc.message().topic().name(), "tx");
  EXPECT_EQ(rc.message().body(), "hello");
  EXPECT_EQ(rc.message().user_properties().at("user"), "v");
  EXPECT_EQ(rc.message().user_properties().count(kRmqMessageId), 0u);
}

// Issue 14 defect 4: keys, tags and properties are bounded on the gRPC send too, with the codes
// RocketMQ's proxy uses; what RocketMQ accepts by default (128 user properties, 16 KiB of them
// with tag and keys) passes, plus the endpoint's own __RMQ_ properties.
TEST(MessageLimitsTest, SendEntriesOverTheLimitsGetRocketMqCodes) {
  GrpcEndpointOptions o;
  MessagingServiceImpl svc(nullptr, o);
  auto base = [] {
    v2::Message m;
    m.mutable_topic()->set_name("n");
    m.set_body("x");
    m.mutable_system_properties()->set_message_id("ID1");
    m.mutable_system_properties()->set_born_host("10.0.0.1");
    m.mutable_system_properties()->set_trace_context("00-abc-def-01");
    return m;
  };
  auto code = [&](const v2::Message& m) {
    proto::SendEntry e;
    return svc.PrepareSendEntry(m, Topic("n", proto::NORMAL), 0, &e).code();
  };

  // RocketMQ's defaults at their edge: 128 user properties and 16 KiB of user bytes.
  v2::Message full = base();
  for (int i = 0; i < 128; ++i) {
    (*full.mutable_user_properties())["p" + std::to_string(i)] = std::string(100, 'v');
  }
  full.mutable_system_properties()->set_tag(std::string(1000, 't'));
  full.mutable_system_properties()->add_keys(std::string(2000, 'k'));
  proto::SendEntry e;
  ASSERT_EQ(svc.PrepareSendEntry(full, Topic("n", proto::NORMAL), 0, &e).code(), v2::Code::OK);
  EXPECT_EQ(e.properties_size(), 131);  // 128 + message id, born host, trace context

  v2::Message m = base();
  m.mutable_system_properties()->add_keys(std::string(kMaxKeyBytes + 1, 'k'));
  EXPECT_EQ(code(m), v2::Code::ILLEGAL_MESSAGE_KEY);
  m = base();  // several keys: their joined length counts
  for (int i = 0; i < 3; ++i) m.mutable_system_properties()->add_keys(std::string(6000, 'k'));
  EXPECT_EQ(code(m), v2::Code::ILLEGAL_MESSAGE_KEY);

  m = base();
  m.mutable_system_properties()->set_tag(std::string(100'000, 't'));
  EXPECT_EQ(code(m), v2::Code::ILLEGAL_MESSAGE_TAG);

  m = base();
  (*m.mutable_user_properties())[std::string(kMaxPropertyNameBytes + 1, 'n')] = "v";
  EXPECT_EQ(code(m), v2::Code::ILLEGAL_MESSAGE_PROPERTY_KEY);

  m = base();
  (*m.mutable_user_properties())["big"] = std::string(kMaxPropertyValueBytes + 1, 'v');
  EXPECT_EQ(code(m), v2::Code::MESSAGE_PROPERTIES_TOO_LARGE);

  m = base();
  for (int i = 0; i < 129; ++i) (*m.mutable_user_properties())["p" + std::to_string(i)] = "v";
  EXPECT_EQ(code(m), v2::Code::MESSAGE_PROPERTIES_TOO_LARGE);

  m = base();  // each within its own limit, too much together
  for (int i = 0; i < 3; ++i) {
    (*m.mutable_user_properties())["p" + std::to_string(i)] = std::string(12'000, 'v');
  }
  EXPECT_EQ(code(m), v2::Code::MESSAGE_PROPERTIES_TOO_LARGE);

  m = base();  // the endpoint's own fields are bounded like any property
  m.mutable_system_properties()->set_trace_context(std::string(kMaxPropertyValueBytes + 1, 'c'));
  EXPECT_EQ(code(m), v2::Code::MESSAGE_PROPERTIES_TOO_LARGE);
}

TEST(ConvertTest, ReservedPropertyNames) {
  EXPECT_TRUE(IsReservedProperty("KEYS"));
  EXPECT_TRUE(IsReservedProperty("__RMQ_anything"));
  EXPECT_TRUE(IsReservedProperty("TIMER_DELIVER_MS"));
  EXPECT_FALSE(IsReservedProperty("keys"));
  EXPECT_FALSE(IsReservedProperty("idx"));
}

TEST(SettingsTest, PublishersGetMaxBodySizeAndExponentialRetry) {
  GrpcEndpointOptions o;
  o.max_body_size = 1234;
  MessagingServiceImpl svc(nullptr, o);
  v2::Settings client;
  client.set_client_type(v2::ClientType::PRODUCER);
  client.mutable_publishing()->add_topics()->set_name("t");
  v2::Settings s = svc.AnswerSettings(client);
  EXPECT_EQ(s.publishing().max_body_size(), 1234);
  EXPECT_TRUE(s.publishing().validate_message_type());
  EXPECT_TRUE(s.backoff_policy().has_exponential_backoff());
  EXPECT_EQ(s.backoff_policy().max_attempts(), 3);
  EXPECT_EQ(s.publishing().topics(0).name(), "t");
}

TEST(SettingsTest, SubscribersOfAFifoTopicAreToldFifo) {
  MessagingServiceImpl svc(nullptr, GrpcEndpointOptions{});
  v2::Settings client;
  client.set_client_type(v2::ClientType::PUSH_CONSUMER);
  client.mutable_subscription()->add_subscriptions()->mutable_topic()->set_name("f");
  EXPECT_TRUE(svc.AnswerSettings(client, /*fifo_group=*/true).subscription().fifo());
  EXPECT_FALSE(svc.AnswerSettings(client, /*fifo_group=*/false).subscription().fifo());
}

TEST(SettingsTest, SubscribersGetBatchLongPollingAndNoFifo) {
  GrpcEndpointOptions o;
  o.receive_batch_size = 16;
  o.long_polling_timeout_ms = 20'000;
  MessagingServiceImpl svc(nullptr, o);
  v2::Settings client;
  client.set_client_type(v2::ClientType::PUSH_CONSUMER);
  SetDurationMs(30'000, client.mutable_subscription()->mutable_long_polling_timeout());
  v2::Settings s = svc.AnswerSettings(client);
  EXPECT_FALSE(s.subscription().fifo());
  EXPECT_EQ(s.subscription().receive_batch_size(), 16);
  EXPECT_EQ(DurationMs(s.subscription().long_polling_timeout()), 20'000);
  EXPECT_EQ(DurationMs(s.backoff_policy().exponential_backoff().initial()), 1000);
}

proto::ReceivedMessage Msg(const std::string& handle, size_t body_bytes) {
  proto::ReceivedMessage m;
  m.set_receipt_handle(handle);
  m.set_body(std::string(body_bytes, 'x'));
  return m;
}

TEST(InFlightCacheTest, EvictsOldestBeyondTheByteBound) {
  InFlightCache cache(3 * 1500);
  cache.Put("a", Msg("a", 1000));
  cache.Put("b", Msg("b", 1000));
  cache.Put("c", Msg("c", 1000));
  cache.Put("d", Msg("d", 1000));
  EXPECT_FALSE(cache.Get("a").has_value());
  EXPECT_TRUE(cache.Get("d").has_value());
  EXPECT_EQ(cache.size(), 3u);
  cache.Put("huge", Msg("huge", 10'000));  // larger than the bound: not cached at all
  EXPECT_FALSE(cache.Get("huge").has_value());
  EXPECT_EQ(cache.size(), 3u);
}

TEST(InFlightCacheTest, RenameAndEraseFollowTheHandle) {
  InFlightCache cache(1 << 20);
  cache.Put("h1", Msg("h1", 10));
  cache.Rename("h1", "h2");
  EXPECT_FALSE(cache.Get("h1").has_value());
  ASSERT_TRUE(cache.Get("h2").has_value());
  EXPECT_EQ(cache.Get("h2")->receipt_handle(), "h2");
  cache.Erase("h2");
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0);
}

}  // namespace
}  // namespace tokimq::rocketmq
