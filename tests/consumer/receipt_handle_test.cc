// Receipt handle codec (broker/src/consumer/receipt_handle.h).
#include "consumer/receipt_handle.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace tokimq::consumer {
namespace {

QueueKey Q() { return QueueKey{"grp", "orders", "%RETRY%grp", 3}; }

TEST(ReceiptHandle, MatchesTheDocumentedExample) {
  // docs/formats/group-state.md "Receipt handle", byte for byte.
  Receipt r{QueueKey{"g", "t", "t", 0}, 5, 1, 1'700'000'030'000};
  EXPECT_EQ(EncodeReceipt(r, 0x0123456789abcdefull),
            "01" "01000000" "67" "01000000" "74" "01000000" "74" "00000000" "0500000000000000"
            "01000000" "30dde5cf8b010000" "eab8631f");
  auto d = DecodeReceipt(EncodeReceipt(r, 0x0123456789abcdefull), 0x0123456789abcdefull);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->queue_offset, 5);
  EXPECT_EQ(d->invisible_until_ms, 1'700'000'030'000);
  // An upper-case or non-hex digit anywhere is refused.
  std::string h = EncodeReceipt(r, 0x0123456789abcdefull);
  for (size_t i = 0; i < h.size(); ++i) {
    std::string bad = h;
    bad[i] = 'G';
    EXPECT_EQ(DecodeReceipt(bad, 0x0123456789abcdefull).status().code(),
              absl::StatusCode::kInvalidArgument) << i;
  }
}

TEST(ReceiptHandle, RoundTripsAndRejectsOtherSecrets) {
  Receipt r{Q(), 99, 4, 1'700'000'030'000};
  std::string h = EncodeReceipt(r, 0xfeed);
  for (char c : h) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c)));
  auto d = DecodeReceipt(h, 0xfeed);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->queue, Q());
  EXPECT_EQ(d->queue_offset, 99);
  EXPECT_EQ(d->epoch, 4u);
  EXPECT_EQ(d->invisible_until_ms, 1'700'000'030'000);
  EXPECT_EQ(DecodeReceipt(h, 0xbeef).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeReceipt("zz", 0xfeed).status().code(), absl::StatusCode::kInvalidArgument);
  for (size_t n = 0; n < h.size(); n += 2) {
    EXPECT_FALSE(DecodeReceipt(h.substr(0, n), 0xfeed).ok()) << n;
  }
}

TEST(ReceiptHandle, ExtremeFieldValuesRoundTrip) {
  Receipt r{QueueKey{std::string(255, 'g'), std::string(255, 't'), std::string(255, 'r'),
                     INT32_MAX},
            INT64_MAX, UINT32_MAX, INT64_MAX};
  const std::string h = EncodeReceipt(r, 7);
  // 1 + 3 x (4 + 255) + 4 + 8 + 4 + 8 + 4 bytes, two hex digits each.
  EXPECT_EQ(h.size(), 2u * (1 + 3 * (4 + 255) + 4 + 8 + 4 + 8 + 4));
  auto d = DecodeReceipt(h, 7);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->queue, r.queue);
  EXPECT_EQ(d->queue_offset, INT64_MAX);
  EXPECT_EQ(d->epoch, UINT32_MAX);
  EXPECT_EQ(d->invisible_until_ms, INT64_MAX);
}

TEST(ReceiptHandle, EmptyOddLengthAndOverlongHandlesAreRefusedAsLength) {
  const std::string h = EncodeReceipt(Receipt{Q(), 1, 1, 1}, 7);
  for (const std::string& bad : {std::string(), h.substr(1), std::string(kMaxHandleChars + 2, '0')}) {
    absl::Status s = DecodeReceipt(bad, 7).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "malformed receipt handle: length") << bad.size();
  }
}

TEST(ReceiptHandle, UpperCaseHexIsRefused) {
  std::string h = EncodeReceipt(Receipt{Q(), 10, 1, 1}, 7);
  for (char& c : h) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(DecodeReceipt(h, 7).status().message(), "malformed receipt handle: not hex");
}

TEST(ReceiptHandle, EveryFlippedDigitFailsTheCheck) {
  const std::string h = EncodeReceipt(Receipt{Q(), 10, 2, 1'700'000'000'000}, 7);
  for (size_t i = 0; i < h.size(); ++i) {
    std::string bad = h;
    bad[i] = bad[i] == '0' ? '1' : '0';
    EXPECT_EQ(DecodeReceipt(bad, 7).status().code(), absl::StatusCode::kInvalidArgument) << i;
  }
}

TEST(ReceiptHandle, ANameTheKeyFormatRefusesDoesNotDecodeEvenWhenSigned) {
  // A group starting with '%' is reserved; a '/' cannot appear in a key part.
  for (const QueueKey& q : {QueueKey{"%sys", "t", "t", 0}, QueueKey{"g", "a/b", "a/b", 0},
                            QueueKey{"g", "t", "t", -1}}) {
    const std::string h = EncodeReceipt(Receipt{q, 0, 1, 1}, 7);
    EXPECT_EQ(DecodeReceipt(h, 7).status().message(), "malformed receipt handle: fields")
        << q.group << " " << q.topic << " " << q.queue_id;
  }
}

}  // namespace
}  // namespace tokimq::consumer
