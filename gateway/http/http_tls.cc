#include "gateway/http/http_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {
namespace {

// OpenSSL's queued errors as one line (and the queue cleared).
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpTls>> HttpTls::Load(std::string cert_file,
                                                        std::string key_file) {
  std::unique_ptr<HttpTls> tls(new HttpTls(std::move(cert_file), std::move(key_file)));
  tls->watch_.Changed();  // The versions this context is made from.
  absl::StatusOr<SSL_CTX*> context = tls->NewContext();
  if (!context.ok()) return context.status();
  tls->context_ = *context;
  return tls;
}

HttpTls::~HttpTls() { SSL_CTX_free(context_); }

absl::StatusOr<SSL_CTX*> HttpTls::NewContext() const {
  ERR_clear_error();
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (context == nullptr) return absl::InternalError(OpenSslErrors());
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  std::string failure;
  if (SSL_CTX_use_certificate_chain_file(context, cert_file_.c_str()) != 1) {
    failure = absl::StrCat("--tls_cert=", cert_file_, ": ", OpenSslErrors());
  } else if (SSL_CTX_use_PrivateKey_file(context, key_file_.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    failure = absl::StrCat("--tls_key=", key_file_,
                           mismatch ? absl::StrCat(" is not the key of --tls_cert=", cert_file_)
                                    : std::string(),
                           ": ", OpenSslErrors());
  } else if (SSL_CTX_check_private_key(context) != 1) {
    failure = absl::StrCat("--tls_key=", key_file_, " is not the key of --tls_cert=", cert_file_,
                           ": ", OpenSslErrors());
  }
  if (!failure.empty()) {
    SSL_CTX_free(context);
    return absl::InvalidArgumentError(failure);
  }
  return context;
}

void HttpTls::ReloadIfChanged() {
  // Looked at once per change: a pair that stays bad is not logged again.
  if (!watch_.Changed()) return;
  absl::StatusOr<SSL_CTX*> context = NewContext();
  if (!context.ok()) {
    LogWarning(absl::StrCat("the TLS certificate changed but does not load (serving the previous "
                            "one): ",
                            context.status().message()));
    return;
  }
  SSL_CTX_free(context_);  // Connections made from it hold their own reference.
  context_ = *context;
  ++reloads_;
  LogInfo(absl::StrCat("serving the TLS certificate re-read from ", cert_file_));
}

SSL* HttpTls::NewSsl() {
  ReloadIfChanged();
  SSL* ssl = SSL_new(context_);
  if (ssl == nullptr) LogWarning(absl::StrCat("TLS: cannot accept: ", OpenSslErrors()));
  return ssl;
}

}  // namespace omnistage
