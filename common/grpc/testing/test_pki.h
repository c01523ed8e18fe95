// TestPki: a certificate authority of a test's own, made with OpenSSL's API in a
// directory of the test's, issuing server and client certificates with the
// names and validity a test asks for (an expired one, one for another host, one
// from a CA nobody trusts).
//
//   TestPki pki(dir);
//   TlsFiles server = pki.Issue("worker", {});        // localhost, 127.0.0.1
//   TlsFiles client = pki.Issue("orchestrator", {});
//   CertOptions expired;
//   expired.not_after = -absl::Hours(1);
//   TlsFiles stale  = pki.Issue("old", expired);
//
// Files are written whole and then renamed into place, as a certificate manager
// does, so a file watcher never reads half a certificate.
#ifndef OMNISTAGE_COMMON_GRPC_TESTING_TEST_PKI_H_
#define OMNISTAGE_COMMON_GRPC_TESTING_TEST_PKI_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/grpc/tls.h"

namespace omnistage {

struct CertOptions {
  // Subject alternative names; the first DNS name is also the common name
  // (else the certificate's file name).
  std::vector<std::string> dns_names = {"localhost"};
  std::vector<std::string> ips = {"127.0.0.1"};
  // Validity, relative to now.
  absl::Duration not_before = -absl::Hours(1);
  absl::Duration not_after = absl::Hours(24);
};

// A fresh directory for a test's certificates: $TEST_TMPDIR/<test name>.
std::string TestDirectory();

class TestPki {
 public:
  // Makes a CA named `ca_name` and writes its certificate to <dir>/<ca_name>.crt.
  explicit TestPki(std::string dir, std::string ca_name = "test-ca");
  ~TestPki();

  const std::string& ca_file() const { return ca_file_; }
  // Writes <dir>/<name>.crt and <dir>/<name>.key (replacing them if present), a
  // certificate for `options` signed by this CA, usable by servers and clients.
  // Returns the files with `ca` set to this CA's certificate.
  TlsFiles Issue(const std::string& name, const CertOptions& options);

 private:
  struct Keys;
  const std::string dir_;
  std::string ca_file_;
  std::unique_ptr<Keys> keys_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_TESTING_TEST_PKI_H_
