#include "common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

namespace tokimq {
namespace {

std::string Mac(const EVP_MD* md, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const unsigned char* ok =
      HMAC(md, key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  if (ok == nullptr) std::abort();  // only on allocation failure inside OpenSSL
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

std::string HmacSha1(std::string_view key, std::string_view data) {
  return Mac(EVP_sha1(), key, data);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  return Mac(EVP_sha256(), key, data);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::abort();
  }
  return out;
}

}  // namespace tokimq
