// TLS 1.3 with an external pre-shared key derived from the cluster key (OpenSSL): no certificates, mutual
// authentication by possession of the key, (EC)DHE for forward secrecy. Internal to the transport.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "net/keys.h"
#include "net/socket.h"

// OpenSSL's types, declared here so users of the transport do not include OpenSSL headers.
struct ssl_ctx_st;
struct bio_method_st;

namespace tessera::net::detail {

// One SSL_CTX per listener (server) or connect call (client), owning the PSK and the socket BIO method.
class TlsContext {
 public:
  TlsContext(const ClusterKey& key, bool server);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool server() const { return server_; }
  const std::array<uint8_t, 32>& psk() const { return psk_; }
  const std::string& fingerprint() const { return fingerprint_; }
  ssl_ctx_st* ctx() const { return ctx_; }
  bio_method_st* bio_method() const { return bio_method_; }

 private:
  bool server_;
  std::array<uint8_t, 32> psk_;
  std::string fingerprint_;
  ssl_ctx_st* ctx_ = nullptr;
  bio_method_st* bio_method_ = nullptr;
};

// Runs the TLS handshake on a connected non-blocking socket and returns the encrypted stream. Throws Error on
// failure or timeout; a failure after both sides agreed on TLS means the keys differ ("authentication failed").
std::unique_ptr<Stream> tls_handshake(std::shared_ptr<const TlsContext> context, Socket socket, const std::string& peer,
                                      Clock::time_point deadline);

}  // namespace tessera::net::detail
