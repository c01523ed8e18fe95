#include "common/grpc/tls.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace omnistage {
namespace {

struct BioCloser {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using UniqueBio = std::unique_ptr<BIO, BioCloser>;
using UniqueX509 = std::unique_ptr<X509, X509Deleter>;
using UniqueKey = std::unique_ptr<EVP_PKEY, KeyDeleter>;

absl::StatusOr<UniqueBio> Open(const std::string& path) {
  errno = 0;
  UniqueBio bio(BIO_new_file(path.c_str(), "r"));
  if (bio == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", errno != 0 ? std::strerror(errno) : "error"));
  }
  return bio;
}

absl::StatusOr<UniqueX509> ReadCertificate(const std::string& path) {
  absl::StatusOr<UniqueBio> bio = Open(path);
  if (!bio.ok()) return bio.status();
  UniqueX509 cert(PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds no PEM certificate"));
  }
  return cert;
}

std::string NotAfter(const X509* cert) {
  UniqueBio out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), X509_get0_notAfter(cert));
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, size > 0 ? static_cast<size_t>(size) : 0);
}

}  // namespace

absl::Status CheckTlsFiles(const TlsFiles& files, TlsSide side) {
  if (!files.enabled()) return absl::OkStatus();
  if (side == TlsSide::kServer && (files.cert.empty() || files.key.empty())) {
    return absl::InvalidArgumentError("a TLS server needs a certificate and its key");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        files.cert.empty() ? "a key without its certificate" : "a certificate without its key");
  }
  if (!files.ca.empty()) {
    absl::StatusOr<UniqueX509> ca = ReadCertificate(files.ca);
    if (!ca.ok()) return ca.status();
  }
  if (files.cert.empty()) return absl::OkStatus();
  absl::StatusOr<UniqueX509> cert = ReadCertificate(files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<UniqueBio> key_file = Open(files.key);
  if (!key_file.ok()) return key_file.status();
  UniqueKey key(PEM_read_bio_PrivateKey(key_file->get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(files.key, " holds no PEM private key"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.key, " is not the key of the certificate in ", files.cert));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert->get())) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate in ", files.cert, " expired on ", NotAfter(cert->get())));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, kTlsRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, kTlsRefreshSeconds);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  if (!files.ca.empty()) options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

std::string PeerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  std::vector<grpc::string_ref> identity = auth->GetPeerIdentity();
  if (identity.empty()) return "";
  return std::string(identity.front().data(), identity.front().size());
}

}  // namespace omnistage
