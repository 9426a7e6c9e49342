// Fixed-width little-endian coding: the one helper every on-disk format goes through
// (STYLE.md rule 4). All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tokimq {

inline void EncodeFixed16(char* dst, uint16_t v) {
  dst[0] = static_cast<char>(v);
  dst[1] = static_cast<char>(v >> 8);
}
inline void EncodeFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline uint16_t DecodeFixed16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}
inline uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | u[i];
  return v;
}
inline uint64_t DecodeFixed64(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | u[i];
  return v;
}

inline void PutFixed16(std::string* dst, uint16_t v) {
  char buf[2];
  EncodeFixed16(buf, v);
  dst->append(buf, 2);
}
inline void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, 4);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64(buf, v);
  dst->append(buf, 8);
}
// u32 length followed by the bytes.
inline void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutFixed32(dst, static_cast<uint32_t>(s.size()));
  dst->append(s.data(), s.size());
}

// Sequential reader over a byte span. Every Get* checks the remaining length first and returns
// false (consuming nothing) when the input is too short, so callers never read past the end and
// never allocate from an unchecked length.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool GetFixed16(uint16_t* v) { return Get(2, [&](const char* p) { *v = DecodeFixed16(p); }); }
  bool GetFixed32(uint32_t* v) { return Get(4, [&](const char* p) { *v = DecodeFixed32(p); }); }
  bool GetFixed64(uint64_t* v) { return Get(8, [&](const char* p) { *v = DecodeFixed64(p); }); }
  // Reads a u32 length then that many bytes (a view into the input). False if short.
  bool GetLengthPrefixed(std::string_view* out) {
    if (in_.size() < 4) return false;
    uint32_t n = DecodeFixed32(in_.data());
    if (in_.size() - 4 < n) return false;
    *out = in_.substr(4, n);
    in_.remove_prefix(4 + static_cast<size_t>(n));
    return true;
  }
  bool GetBytes(size_t n, std::string_view* out) {
    if (in_.size() < n) return false;
    *out = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  size_t remaining() const { return in_.size(); }

 private:
  template <typename F>
  bool Get(size_t n, F&& f) {
    if (in_.size() < n) return false;
    f(in_.data());
    in_.remove_prefix(n);
    return true;
  }
  std::string_view in_;
};

}  // namespace tokimq
