// Writes the seed corpus of every fuzz target: fuzz/corpus/<target>/<name>, small valid inputs
// made with the real encoders (so they stay valid when a format changes: regenerate with
// `build/fuzz/bin/tokimq_make_corpus fuzz/corpus`). Files already there (e.g. kept crash
// inputs) are left alone; seeds are overwritten. Not a fuzzer: a plain program.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "commitlog/record.h"
#include "common/coding.h"
#include "consumer/group_state.h"
#include "consumer/receipt_handle.h"
#include "proto/framing.h"
#include "proto/tokimq.pb.h"
#include "timerstore/recall_handle.h"
#include "timerstore/timer_checkpoint.h"
#include "timerstore/timer_log.h"
#include "timerstore/timer_wheel.h"

namespace tokimq {
namespace {

std::filesystem::path g_root;

void Put(const std::string& target, const std::string& name, const std::string& bytes) {
  std::filesystem::path dir = g_root / target;
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Mode(uint8_t mode, const std::string& payload) {
  return std::string(1, static_cast<char>(mode)) + payload;
}

// The encoding FuzzedDataProvider::ConsumeRandomLengthString reads: a backslash doubled, and
// "\\" followed by any other byte ends the string.
std::string ProviderString(const std::string& s) {
  std::string out;
  for (char c : s) {
    out.push_back(c);
    if (c == '\\') out.push_back('\\');
  }
  return out + "\\;";
}

std::string Frame(const google::protobuf::MessageLite& m) { return *wire::EncodeFrame(m); }

Message SampleMessage() {
  Message m;
  m.topic = "orders";
  m.queue_id = 3;
  m.queue_offset = QueueOffset(42);
  m.physical_offset = PhysicalOffset(4096);
  m.born_ms = 1'700'000'000'000;
  m.store_ms = 1'700'000'000'123;
  m.flags = kFlagIndexed;
  m.properties = {{"KEYS", "order-1"}, {"TAGS", "created"}, {"UNIQ_KEY", "0123456789abcdef"}};
  m.body = "hello";
  return m;
}

void Duration() {
  const char* texts[] = {"250ms", "30s", "5m", "2h", "7d", "1h30m", "0", "1500",
                         "2026-12-01T10:00:00Z", "2026-12-01T10:00:00.123Z", "1700000000000",
                         "9999-12-31T23:59:59.999Z"};
  int i = 0;
  for (const char* t : texts) Put("duration", "seed" + std::to_string(i++), t);
}

void Record() {
  std::string rec;
  record::Encode(SampleMessage(), &rec);
  Put("record", "message", Mode(0, rec));
  Put("record", "message_fixed", Mode(1, rec));
  Message timer = SampleMessage();
  timer.topic = "tokimq_sys_timer";
  timer.properties["REAL_TOPIC"] = "orders";
  timer.properties["REAL_QID"] = "3";
  timer.properties["TIMER_DELIVER_MS"] = "1700000005000";
  rec.clear();
  record::Encode(timer, &rec);
  Put("record", "timer_message", Mode(0, rec));
  Message empty;
  rec.clear();
  record::Encode(empty, &rec);
  Put("record", "empty_message", Mode(0, rec));
  char blank[record::kBlankSize];
  record::EncodeBlankTo(1024, blank);
  Put("record", "blank", Mode(0, std::string(blank, sizeof(blank))));
  // Edits: a properties section then keys/values in FuzzedDataProvider form.
  std::string section;
  for (const auto& [k, v] : SampleMessage().properties) {
    PutLengthPrefixed(&section, k);
    PutLengthPrefixed(&section, v);
  }
  Put("record", "edits", Mode(2, ProviderString(section) + ProviderString("KEYS") +
                                     ProviderString("x") + ProviderString("ZZ") + "\x01\x02"));
  Put("record", "encode", Mode(3, ProviderString("topic") + std::string(40, '\x01') +
                                      ProviderString("k") + ProviderString("v") + "body"));
}

void TimerUnits() {
  TimerUnit u;
  u.flags = kUnitRoll;
  u.prev_pos = TimerLogPosition(144);
  u.write_ms = 1'700'000'000'000;
  u.deliver_ms = 1'700'000'009'000;
  u.slot_tick = 1'700'000'009;
  u.physical_offset = PhysicalOffset(8192);
  u.ref = 72;
  u.msg_size = 180;
  u.topic_hash = 0xdeadbeef;
  u.roll_count = 2;
  char buf[kTimerUnitSize];
  EncodeTimerUnit(u, buf);
  Put("timer_unit", "roll", Mode(0, std::string(buf, sizeof(buf))));
  Put("timer_unit", "roll_fixed", Mode(1, std::string(buf, sizeof(buf))));
  TimerUnit del;
  del.flags = kUnitDelete;
  EncodeTimerUnit(del, buf);
  Put("timer_unit", "delete", Mode(0, std::string(buf, sizeof(buf))));
}

void TimerWheelSeeds() {
  TimerSlot s{1'700'000'009, TimerLogPosition(72), TimerLogPosition(216), 3};
  char buf[TimerWheel::kSlotSize];
  EncodeTimerSlot(s, buf);
  const std::string slot(buf, sizeof(buf));
  Put("timer_wheel", "slot", Mode(0, slot));
  Put("timer_wheel", "slot_fixed", Mode(1, slot));
  Put("timer_wheel", "slot_empty", Mode(0, std::string(TimerWheel::kSlotSize, '\0')));
  // precision 100 ms (payload byte 99 + 1), 4 slots (3 + 1); slot of tick 9 lives at index 1.
  TimerSlot live{9, TimerLogPosition(0), TimerLogPosition(72), 2};
  EncodeTimerSlot(live, buf);
  std::string slots(TimerWheel::kSlotSize, '\0');
  slots += std::string(buf, sizeof(buf));
  slots += std::string(2 * TimerWheel::kSlotSize, '\0');
  Put("timer_wheel", "file", Mode(2, std::string("\x63\x03", 2) + slots));
  Put("timer_wheel", "file_raw", Mode(3, EncodeTimerWheelHeader(1000, 4) + slots));
}

void Checkpoint() {
  TimerCheckpointData c;
  c.precision_ms = 1000;
  c.read_tick = 1'700'000'000;
  c.timerlog_flush_pos = TimerLogPosition(720);
  c.timerlog_scan_from = TimerLogPosition(360);
  c.enqueue_queue_offset = QueueOffset(10);
  c.last_enqueued_physical_offset = PhysicalOffset(4096);
  c.commitlog_scan_from = PhysicalOffset(2048);
  c.pending = 7;
  c.pins = {{0, 3}, {1, 4}};
  c.recalled = {{PhysicalOffset(4096), 1'700'000'005'000}};
  Put("timer_checkpoint", "full", Mode(0, c.Encode()));
  Put("timer_checkpoint", "full_fixed", Mode(1, c.Encode()));
  Put("timer_checkpoint", "empty", Mode(0, TimerCheckpointData{}.Encode()));
}

void Recall() {
  RecallHandle h;
  h.physical_offset = PhysicalOffset(4096);
  h.deliver_ms = 1'700'000'005'000;
  h.id_crc = 0x12345678;
  const std::string text = h.Encode();
  Put("recall_handle", "handle", Mode(0, text));
  std::string upper = text;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Put("recall_handle", "upper", Mode(0, upper));
  Put("recall_handle", "raw", Mode(1, std::string(25, '\x07')));
}

void Receipts() {
  const uint64_t secret = 0x0123456789abcdefULL;
  std::string key(8, '\0');
  EncodeFixed64(key.data(), secret);
  consumer::Receipt r;
  r.queue = {"billing", "orders", "orders", 3};
  r.queue_offset = 42;
  r.epoch = 2;
  r.invisible_until_ms = 1'700'000'030'000;
  const std::string handle = consumer::EncodeReceipt(r, secret);
  Put("receipt_handle", "handle", Mode(0, key + handle));
  r.queue.read_topic = "%RETRY%billing";
  Put("receipt_handle", "retry_handle", Mode(0, key + consumer::EncodeReceipt(r, secret)));
  // Binary form without its check (the target appends it).
  std::string bin(1, '\x01');
  for (const char* s : {"billing", "orders", "orders"}) PutLengthPrefixed(&bin, s);
  PutFixed32(&bin, 3);
  PutFixed64(&bin, 42);
  PutFixed32(&bin, 2);
  PutFixed64(&bin, 1'700'000'030'000);
  Put("receipt_handle", "binary", Mode(1, key + bin));
  Put("receipt_handle", "build", Mode(2, key + ProviderString("g") + ProviderString("t") +
                                             ProviderString("t") + std::string(24, '\x01')));
}

void GroupState() {
  consumer::QueueKey q{"billing", "orders", "orders", 3};
  Put("group_state", "progress_key", Mode(0, consumer::ProgressKey(q)));
  Put("group_state", "lease_key", Mode(0, consumer::LeaseKey(q, 42)));
  Put("group_state", "block_key", Mode(0, consumer::LeaseBlockKey(q, 40)));
  Put("group_state", "policy_key", Mode(0, consumer::PolicyKey("billing")));
  Put("group_state", "secret_key", Mode(0, consumer::kHandleSecretKey));
  auto value = [](const std::string& name, const std::string& key, const std::string& v) {
    Put("group_state", name, Mode(1, ProviderString(key) + v));
  };
  const std::string pk = consumer::ProgressKey(q);
  value("offset_value", pk, consumer::EncodeOffsetValue(pk, 42));
  const std::string lk = consumer::LeaseKey(q, 42);
  consumer::LeaseRecord lease;
  lease.epoch = 2;
  lease.attempt = 3;
  lease.invisible_until_ms = 1'700'000'030'000;
  lease.received_ms = 1'700'000'000'000;
  value("lease_value", lk, consumer::EncodeLeaseValue(lk, lease));
  const std::string bk = consumer::LeaseBlockKey(q, 40);
  value("block_value", bk, consumer::EncodeLeaseBlockValue(bk, {{40, lease}, {41, lease}}));
  consumer::LeaseRecord parked = lease;
  parked.parked = true;
  parked.msg_group = "customer-7";
  value("block_value_fifo", bk, consumer::EncodeLeaseBlockValue(bk, {{40, lease}, {43, parked}}));
  GroupPolicy p;
  p.max_attempts = 5;
  p.ttl_ms = 86'400'000;
  p.backoff_ms = {10'000, 60'000};
  const std::string polk = consumer::PolicyKey("billing");
  value("policy_value", polk, consumer::EncodePolicyValue(polk, p));
  value("secret_value", consumer::kHandleSecretKey,
        consumer::EncodeSecretValue(consumer::kHandleSecretKey, 0xfeedULL));
}

proto::Request SendRequest(uint64_t id, const std::string& topic, int64_t delay_ms,
                           const std::string& group) {
  proto::Request req;
  req.set_id(id);
  proto::SendEntry* e = req.mutable_send()->add_entries();
  e->set_topic(topic);
  e->set_body("hello");
  e->set_key("order-1");
  e->set_tag("created");
  (*e->mutable_properties())["trace"] = "abc";
  if (delay_ms > 0) e->set_delay_ms(delay_ms);
  if (!group.empty()) e->set_message_group(group);
  return req;
}

std::vector<proto::Request> SampleRequests() {
  std::vector<proto::Request> out;
  proto::Request r;
  r.set_id(1);
  r.mutable_handshake()->set_protocol_version(1);
  r.mutable_handshake()->set_client_id("fuzz");
  out.push_back(r);
  out.push_back(SendRequest(2, "t", 0, ""));
  out.push_back(SendRequest(3, "d", 5000, ""));
  out.push_back(SendRequest(4, "f", 0, "customer-7"));
  r.Clear();
  r.set_id(5);
  r.mutable_receive()->set_group("billing");
  r.mutable_receive()->set_topic("t");
  r.mutable_receive()->set_max_messages(4);
  r.mutable_receive()->set_invisible_ms(1000);
  out.push_back(r);
  r.mutable_receive()->set_encoded_properties(true);
  r.set_id(6);
  out.push_back(r);
  r.Clear();
  r.set_id(7);
  r.mutable_ack()->set_group("billing");
  r.mutable_ack()->add_receipt_handles("00");
  out.push_back(r);
  r.Clear();
  r.set_id(8);
  r.mutable_nack()->set_group("billing");
  r.mutable_nack()->set_receipt_handle("00");
  r.mutable_nack()->set_delay_ms(1000);
  out.push_back(r);
  r.Clear();
  r.set_id(9);
  r.mutable_change_invisible_duration()->set_group("billing");
  r.mutable_change_invisible_duration()->set_receipt_handle("00");
  r.mutable_change_invisible_duration()->set_invisible_ms(1000);
  out.push_back(r);
  r.Clear();
  r.set_id(10);
  r.mutable_stats();
  out.push_back(r);
  r.Clear();
  r.set_id(11);
  r.mutable_advance_clock()->set_advance_ms(6000);
  out.push_back(r);
  r.Clear();
  r.set_id(12);
  r.mutable_timer_checkpoint();
  out.push_back(r);
  r.Clear();
  r.set_id(13);
  r.mutable_recall()->set_recall_handle(std::string(50, '0'));
  out.push_back(r);
  r.Clear();
  r.set_id(14);
  auto* t = r.mutable_create_topic()->mutable_topic();
  t->set_name("n");
  t->set_type(proto::DELAY);
  t->set_queues(2);
  out.push_back(r);
  r.Clear();
  r.set_id(15);
  r.mutable_update_topic()->mutable_topic()->set_name("n");
  r.mutable_update_topic()->mutable_topic()->set_queues(3);
  out.push_back(r);
  r.Clear();
  r.set_id(16);
  r.mutable_describe_topic()->set_name("t");
  out.push_back(r);
  r.Clear();
  r.set_id(17);
  r.mutable_list_topics();
  out.push_back(r);
  r.Clear();
  r.set_id(18);
  r.mutable_delete_topic()->set_name("n");
  out.push_back(r);
  return out;
}

void Frames() {
  std::vector<proto::Request> reqs = SampleRequests();
  for (size_t i = 0; i < reqs.size(); ++i) {
    Put("frame", "request" + std::to_string(i), Frame(reqs[i]));
    Put("broker_request", "request" + std::to_string(i), Frame(reqs[i]));
  }
  // Sequences: send then receive then advance; a delayed send, advance, receive.
  Put("broker_request", "send_receive", Frame(reqs[1]) + Frame(reqs[5]) + Frame(reqs[4]));
  Put("broker_request", "delay_advance_receive",
      Frame(reqs[2]) + Frame(reqs[10]) + Frame(reqs[4]) + Frame(reqs[9]));
  proto::Response resp;
  resp.set_id(2);
  proto::SendResult* sr = resp.mutable_send()->add_results();
  sr->set_message_id("0123456789abcdef");
  sr->set_topic("t");
  sr->set_recall_handle(std::string(50, 'a'));
  Put("frame", "response_send", Frame(resp));
  resp.Clear();
  resp.set_id(5);
  proto::ReceivedMessage* m = resp.mutable_receive()->add_messages();
  m->set_message_id("id");
  m->set_topic("t");
  m->set_body("hello");
  (*m->mutable_properties())["KEYS"] = "order-1";
  m->set_receipt_handle("abcd");
  Put("frame", "response_receive", Frame(resp));
  resp.Clear();
  resp.set_id(7);
  resp.mutable_status()->set_code(3);
  resp.mutable_status()->set_message("bad");
  Put("frame", "response_error", Frame(resp));
}

void Config() {
  Put("config", "example",
      "data_dir = \"/var/lib/tokimq\"\nbind = \"0.0.0.0\"\nport = 10911\nflush = \"sync\"\n"
      "timer_precision = \"100ms\"\ntimer_window = \"7d\"\nretention = \"3d\"\n"
      "max_long_poll = 20000\nmanual_clock = false\nio_threads = 2\n\n"
      "[group.billing]\nmax_attempts = 5\nbackoff = [\"10s\", \"1m\", \"10m\"]\nttl = \"1d\"\n");
  Put("config", "all_keys",
      "data_dir = \"d\"\nbind = \"::1\"\nport = 0\nport_file = \"p\"\nlog_level = \"warn\"\n"
      "log_file = \"l\"\nio_threads = 1\nworker_threads = 8\nmax_frame_bytes = 1048576\n"
      "manual_clock = true\nflush = \"async\"\nasync_flush_interval = \"200ms\"\n"
      "segment_size = 4096\nmax_message_size = 1024\ntimer_precision = 1000\n"
      "timer_thread_nice = -10\ntimer_window = \"1h30m\"\nretention = \"3d\"\n"
      "retention_interval = \"1m\"\nmax_long_poll = \"20s\"\n"
      "group.\"sp ace\".max_attempts = 2\n");
  Put("config", "empty", "");
}

void SqlFilterSeeds() {
  using namespace std::string_literals;
  const std::string seeds[] = {
      "region = 'eu' AND amount > 100\0region=eu\0amount=250"s,
      "a BETWEEN 1 AND 10 OR b NOT BETWEEN -5 AND 5.5E1\0a=3\0b=60"s,
      "TAGS IN ('a', 'b''c') AND KEYS NOT IN ('x')\0TAGS=b'c"s,
      "a IS NULL OR NOT (b IS NOT NULL) /* c */ -- d\n\0b="s,
      "flag = TRUE AND x <> 'y' AND v CONTAINS 'z' AND w NOT STARTSWITH 'q'\0flag=true"s,
      "((a > b)) AND -c < +1.5 AND d = 7L\0a=2\0b=1\0c=3\0d=7"s,
      "a > 'x'"s,
  };
  int i = 0;
  for (const std::string& s : seeds) Put("sql_filter", "seed" + std::to_string(i++), s);
}

}  // namespace
}  // namespace tokimq

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  tokimq::g_root = argv[1];
  tokimq::Duration();
  tokimq::Record();
  tokimq::TimerUnits();
  tokimq::TimerWheelSeeds();
  tokimq::Checkpoint();
  tokimq::Recall();
  tokimq::Receipts();
  tokimq::GroupState();
  tokimq::Frames();
  tokimq::Config();
  tokimq::SqlFilterSeeds();
  return 0;
}
