#include "common/grpc/testing/test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "TestPki: %s failed\n", what);
    std::abort();
  }
}

EVP_PKEY* NewKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  Check(key != nullptr, "EVP_EC_gen");
  return key;
}

void AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  Check(X509_add_ext(cert, ext, -1) == 1, "X509_add_ext");
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `common_name`, valid over [now + not_before,
// now + not_after], issued by `issuer` (itself when null); not yet signed.
X509* NewCertificate(EVP_PKEY* key, const std::string& common_name, absl::Duration not_before,
                     absl::Duration not_after, X509* issuer) {
  static long serial = 1;
  X509* cert = X509_new();
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert), absl::ToInt64Seconds(not_before));
  X509_gmtime_adj(X509_getm_notAfter(cert), absl::ToInt64Seconds(not_after));
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert, issuer == nullptr ? name : X509_get_subject_name(issuer));
  return cert;
}

void WriteFileAtomically(const std::string& path, const std::function<bool(BIO*)>& write) {
  const std::string temporary = path + ".new";
  BIO* bio = BIO_new_file(temporary.c_str(), "w");
  Check(bio != nullptr, "BIO_new_file");
  Check(write(bio), "PEM write");
  BIO_free(bio);
  Check(std::rename(temporary.c_str(), path.c_str()) == 0, "rename");
}

}  // namespace

std::string TestDirectory() {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(base != nullptr ? base : "/tmp", "/",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Check(std::system(("mkdir -p '" + dir + "'").c_str()) == 0, "mkdir");
  return dir;
}

struct TestPki::Keys {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  ~Keys() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

TestPki::TestPki(std::string dir, std::string ca_name)
    : dir_(std::move(dir)), keys_(std::make_unique<Keys>()) {
  keys_->key = NewKey();
  keys_->cert = NewCertificate(keys_->key, ca_name, -absl::Hours(1), absl::Hours(24 * 30),
                               nullptr);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, keys_->cert, keys_->cert, nullptr, nullptr, 0);
  AddExtension(keys_->cert, &ctx, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(keys_->cert, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(keys_->cert, &ctx, NID_subject_key_identifier, "hash");
  Check(X509_sign(keys_->cert, keys_->key, EVP_sha256()) > 0, "X509_sign (CA)");
  ca_file_ = absl::StrCat(dir_, "/", ca_name, ".crt");
  X509* cert = keys_->cert;
  WriteFileAtomically(ca_file_, [cert](BIO* bio) { return PEM_write_bio_X509(bio, cert) == 1; });
}

TestPki::~TestPki() = default;

TlsFiles TestPki::Issue(const std::string& name, const CertOptions& options) {
  EVP_PKEY* key = NewKey();
  const std::string common_name = options.dns_names.empty() ? name : options.dns_names.front();
  X509* cert = NewCertificate(key, common_name, options.not_before, options.not_after,
                              keys_->cert);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, keys_->cert, cert, nullptr, nullptr, 0);
  AddExtension(cert, &ctx, NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(cert, &ctx, NID_key_usage, "critical,digitalSignature");
  AddExtension(cert, &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
  AddExtension(cert, &ctx, NID_authority_key_identifier, "keyid");
  std::vector<std::string> names;
  for (const std::string& dns : options.dns_names) names.push_back("DNS:" + dns);
  for (const std::string& ip : options.ips) names.push_back("IP:" + ip);
  if (!names.empty()) {
    AddExtension(cert, &ctx, NID_subject_alt_name, absl::StrJoin(names, ","));
  }
  Check(X509_sign(cert, keys_->key, EVP_sha256()) > 0, "X509_sign");
  TlsFiles files;
  files.cert = absl::StrCat(dir_, "/", name, ".crt");
  files.key = absl::StrCat(dir_, "/", name, ".key");
  files.ca = ca_file_;
  // The key first: a watcher that sees the new certificate finds its key.
  WriteFileAtomically(files.key, [key](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  });
  WriteFileAtomically(files.cert, [cert](BIO* bio) { return PEM_write_bio_X509(bio, cert) == 1; });
  X509_free(cert);
  EVP_PKEY_free(key);
  return files;
}

}  // namespace omnistage
