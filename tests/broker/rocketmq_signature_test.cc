// The RocketMQ gRPC signature check (broker/auth/rocketmq_signature.h) and the HMAC helpers it
// stands on. Expected values come from RocketMQ's own tests (AuthenticationEvaluatorTest,
// DefaultAuthenticationContextBuilderTest) and from Python's hmac module, not from this code.
#include "broker/auth/rocketmq_signature.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "broker/auth/auth_store.h"
#include "common/hmac.h"
#include "proto/auth_proof.h"
#include "test_util.h"

namespace tokimq::broker::auth {
namespace {

// RocketMQ AuthenticationEvaluatorTest: user "test", password "test", content "test" ->
// base64 "DJRRXBXlCVuKh6ULoN87847QX+Y=", which is this hex.
TEST(HmacTest, RocketMqExampleValue) {
  EXPECT_EQ(HexEncode(HmacSha1("test", "test")), "0c94515c15e5095b8a87a50ba0df3bf38ed05fe6");
}

TEST(HmacTest, NativeProofIsHmacSha256OfNonceAndClientId) {
  // python3: hmac.new(b'secret-key', bytes(32) + b'client-1', hashlib.sha256).hexdigest()
  EXPECT_EQ(HexEncode(wire::AuthProof("secret-key", std::string(32, '\0'), "client-1")),
            "c6ab14f4ece9731a689ca34306be751e2354a0bb16a5d8710e4b56ec315b4844");
}

TEST(HmacTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_NE(RandomBytes(32), RandomBytes(32));
}

// RocketMQ DefaultAuthenticationContextBuilderTest's header.
TEST(AuthorizationHeaderTest, ParsesRocketMqExample) {
  auto h = ParseAuthorizationHeader(
      "MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=x-mq-date-time, "
      "Signature=D18A9CBCDDBA9041D6693268FEF15A989E64430B");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->access_key, "abc");
  EXPECT_EQ(h->signature_hex, "D18A9CBCDDBA9041D6693268FEF15A989E64430B");
  // A credential scope after '/' (RocketMQ 4 style) is ignored; no spaces are needed.
  auto scoped = ParseAuthorizationHeader(
      "MQv2-HMAC-SHA1 Credential=abc/region,Signature=D18A9CBCDDBA9041D6693268FEF15A989E64430B");
  ASSERT_TRUE(scoped.ok()) << scoped.status();
  EXPECT_EQ(scoped->access_key, "abc");
}

TEST(AuthorizationHeaderTest, RefusesMalformedHeadersOfEveryShape) {
  const std::string sig = "Signature=D18A9CBCDDBA9041D6693268FEF15A989E64430B";
  for (const std::string& bad : {
           std::string(""),
           std::string("MQv2-HMAC-SHA1"),                                 // no items
           "MQv2-HMAC-SHA256 Credential=abc, " + sig,                     // wrong scheme
           "mqv2-hmac-sha1 Credential=abc, " + sig,                       // scheme case
           "Credential=abc, " + sig,                                      // no scheme
           std::string("MQv2-HMAC-SHA1 Credential=abc"),                  // no signature
           "MQv2-HMAC-SHA1 " + sig,                                       // no credential
           "MQv2-HMAC-SHA1 Credential=, " + sig,                          // empty credential
           "MQv2-HMAC-SHA1 Credential=/x, " + sig,                        // empty access key
           "MQv2-HMAC-SHA1 Credential=abc, SignedHeaders=host, " + sig,   // other header
           "MQv2-HMAC-SHA1 Credential=abc, Junk, " + sig,                 // item without '='
           "MQv2-HMAC-SHA1 Credential=abc, " + sig + ",",                 // trailing comma
           std::string("MQv2-HMAC-SHA1 Credential=abc, Signature=D18A"),  // short
           std::string("MQv2-HMAC-SHA1 Credential=abc, Signature=") + std::string(40, 'g'),
           "MQv2-HMAC-SHA1 Credential=abc, " + sig + "00",  // long
       }) {
    EXPECT_FALSE(ParseAuthorizationHeader(bad).ok()) << bad;
  }
}

TEST(MqDateTimeTest, ParsesUtc) {
  EXPECT_EQ(*ParseMqDateTime("20231227T194619Z"), 1703706379000);
  EXPECT_EQ(*ParseMqDateTime("20240229T235959Z"), 1709251199000);  // leap day
  EXPECT_EQ(*ParseMqDateTime("19700101T000000Z"), 0);
  for (const char* bad :
       {"", "20231227T194619", "20231227 194619Z", "2023-12-27T19:46:19Z", "20231327T194619Z",
        "20230229T120000Z", "20231227T246000Z", "20231227T196019Z", "20231227T194660Z",
        "2023122xT194619Z", "20231227T194619Z0"}) {
    EXPECT_FALSE(ParseMqDateTime(bad).ok()) << bad;
  }
}

class SignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_.Join("meta"), &raw).ok());
    db_.reset(raw);
    store_ = std::move(*AuthStore::Open(db_.get()));
    ASSERT_TRUE(store_->CreateUser(User{"abc", "abc-secret", UserType::kNormal, true}).ok());
    ASSERT_TRUE(store_->CreateUser(User{"off", "abc-secret", UserType::kNormal, false}).ok());
  }
  absl::StatusCode Verify(const std::string& header, const std::string& date, int64_t now_ms) {
    return VerifyRocketMqSignature(*store_, header, date, now_ms).status().code();
  }

  static constexpr char kDate[] = "20231227T194619Z";
  static constexpr int64_t kDateMs = 1703706379000;
  // python3: hmac.new(b'abc-secret', b'20231227T194619Z', hashlib.sha1).hexdigest().upper()
  static constexpr char kSig[] = "A95CC4B18BBC7018F9D42A1D1532DE1BC911F4F4";
  static std::string Header(const std::string& ak, const std::string& sig = kSig) {
    return "MQv2-HMAC-SHA1 Credential=" + ak + ", SignedHeaders=x-mq-date-time, Signature=" + sig;
  }

  tokimq::testing::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<AuthStore> store_;
};

TEST_F(SignatureTest, RightSignatureAuthenticates) {
  auto who = VerifyRocketMqSignature(*store_, Header("abc"), kDate, kDateMs);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(*who, "abc");
  // Lower-case hex is the same signature.
  std::string lower = kSig;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(Verify(Header("abc", lower), kDate, kDateMs), absl::StatusCode::kOk);
}

TEST_F(SignatureTest, WrongKeyUserOrDateIsRefused) {
  const auto unauth = absl::StatusCode::kUnauthenticated;
  std::string flipped = kSig;
  flipped[0] = 'B';
  EXPECT_EQ(Verify(Header("abc", flipped), kDate, kDateMs), unauth);      // wrong secret
  EXPECT_EQ(Verify(Header("ghost"), kDate, kDateMs), unauth);             // unknown user
  EXPECT_EQ(Verify(Header("off"), kDate, kDateMs), unauth);               // disabled user
  EXPECT_EQ(Verify(Header("abc"), "20231227T194620Z", kDateMs), unauth);  // other date signed
  EXPECT_EQ(Verify("", kDate, kDateMs), unauth);                          // no header
  EXPECT_EQ(Verify(Header("abc"), "", kDateMs), unauth);                  // no date
  EXPECT_EQ(Verify("MQv2-HMAC-SHA1 Credential=abc", kDate, kDateMs), unauth);
}

TEST_F(SignatureTest, ReplayWindowIsFifteenMinutesEitherWay) {
  const int64_t window = kSignatureWindowMs;
  EXPECT_EQ(window, 900'000);
  EXPECT_EQ(Verify(Header("abc"), kDate, kDateMs + window), absl::StatusCode::kOk);
  EXPECT_EQ(Verify(Header("abc"), kDate, kDateMs - window), absl::StatusCode::kOk);
  EXPECT_EQ(Verify(Header("abc"), kDate, kDateMs + window + 1),
            absl::StatusCode::kUnauthenticated);  // stale
  EXPECT_EQ(Verify(Header("abc"), kDate, kDateMs - window - 1),
            absl::StatusCode::kUnauthenticated);  // from the future
}

TEST_F(SignatureTest, EveryFailureSaysTheSame) {
  std::string why;
  auto a = VerifyRocketMqSignature(*store_, Header("ghost"), kDate, kDateMs, &why);
  EXPECT_EQ(why, "unknown user 'ghost'");  // for the broker's log only
  auto b = VerifyRocketMqSignature(*store_, Header("abc", std::string(40, '0')), kDate, kDateMs);
  EXPECT_EQ(a.status().message(), "authentication failed");
  EXPECT_EQ(b.status().message(), "authentication failed");
}

}  // namespace
}  // namespace tokimq::broker::auth
