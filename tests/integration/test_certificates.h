// Test certificates made at test time with the openssl tool (never committed): a CA
// (ca.pem / ca.key), a server certificate signed by it for 127.0.0.1 and localhost (server.pem
// / server.key), and an unrelated CA (other.pem / other.key), all EC P-256, valid two days.
// Used by the TLS tests (tls_test.cc, replication_tls_test.cc).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace tokimq::testing {

// Writes the files above into `dir`; false when openssl failed.
inline bool MakeCertificates(const std::string& dir) {
  std::ofstream(dir + "/ext.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string cmd =
      "cd " + dir + " && openssl req -x509" + ec +
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=tokimq-test-ca 2>/dev/null && "
      "openssl req" +
      ec +
      " -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null && "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile ext.cnf -out server.pem 2>/dev/null && "
      "openssl req -x509" +
      ec +
      " -keyout other.key -out other.pem -days 2 -subj /CN=other-ca "
      "2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace tokimq::testing
