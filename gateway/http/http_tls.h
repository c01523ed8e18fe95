// HttpTls: HTTPS for HttpServer — an OpenSSL server context from PEM files (a
// certificate chain and its private key), TLS 1.2 or later, re-read when
// either file changes, so a rotated certificate (cert-manager renewing a
// Secret) reaches new connections without a restart; open connections keep the
// one they began with. A pair that fails to load (a half-written rotation, a
// key that does not match) is logged and the previous pair served on.
//
//   absl::StatusOr<std::unique_ptr<HttpTls>> tls = HttpTls::Load("tls.crt", "tls.key");
//   HttpServer::Listen("0.0.0.0:8443", max_body_bytes, tls->get());
//
// NewSsl() runs on the HttpServer's loop thread only.
#ifndef OMNISTAGE_GATEWAY_HTTP_HTTP_TLS_H_
#define OMNISTAGE_GATEWAY_HTTP_HTTP_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_watch.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace omnistage {

class HttpTls {
 public:
  // INVALID_ARGUMENT naming the file and OpenSSL's reason when the pair does
  // not load.
  static absl::StatusOr<std::unique_ptr<HttpTls>> Load(std::string cert_file,
                                                       std::string key_file);
  ~HttpTls();
  HttpTls(const HttpTls&) = delete;
  HttpTls& operator=(const HttpTls&) = delete;

  // A server-side SSL for one accepted connection, from the newest pair (the
  // files are looked at again at most once a second); nullptr
  // when OpenSSL cannot make one.
  SSL* NewSsl();
  // How many times a changed pair was loaded since Load().
  int reloads() const { return reloads_; }

 private:
  HttpTls(std::string cert_file, std::string key_file)
      : cert_file_(cert_file),
        key_file_(key_file),
        watch_({std::move(cert_file), std::move(key_file)}, absl::Seconds(1)) {}
  // A context from the files as they are now.
  absl::StatusOr<SSL_CTX*> NewContext() const;
  void ReloadIfChanged();

  const std::string cert_file_;
  const std::string key_file_;
  SSL_CTX* context_ = nullptr;
  FileWatch watch_;
  int reloads_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_HTTP_TLS_H_
