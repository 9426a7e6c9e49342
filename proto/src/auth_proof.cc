#include "proto/auth_proof.h"

#include "common/hmac.h"

namespace tokimq::wire {

std::string AuthProof(std::string_view secret_key, std::string_view nonce,
                      std::string_view client_id) {
  std::string data;
  data.reserve(nonce.size() + client_id.size());
  data.append(nonce);
  data.append(client_id);
  return HmacSha256(secret_key, data);
}

}  // namespace tokimq::wire
