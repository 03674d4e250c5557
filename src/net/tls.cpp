// TLS 1.3 external-PSK transport over non-blocking sockets (OpenSSL 3). A custom socket BIO sends with
// MSG_NOSIGNAL, so a vanished peer is an error rather than SIGPIPE, without touching process-wide signal state.
#include "net/tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "util/error.h"

namespace tessera::net::detail {
namespace {

// Both ends offer exactly one identity; a different key shows up as a binder that does not verify.
constexpr std::string_view kPskIdentity = "tessera-cluster-v1";
constexpr std::string_view kPskLabel = "tessera cluster key v1: TLS 1.3 PSK";
// TLS_AES_128_GCM_SHA256: the PSK's hash must be SHA-256 to match every suite we allow.
constexpr unsigned char kPskCipher[2] = {0x13, 0x01};
constexpr const char* kCipherSuites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
// A fixed BIO type id: BIO_get_new_index() hands out only about 128 ids per process, one per context would run out.
constexpr int kBioType = 0x7e | BIO_TYPE_SOURCE_SINK;

// What the custom BIO reads and writes: the socket, and the errno of its last failed call (OpenSSL may clobber
// errno before we get to report it).
struct BioSocket {
  int fd = -1;
  int last_errno = 0;
};

BioSocket* bio_socket(BIO* b) { return static_cast<BioSocket*>(BIO_get_data(b)); }

int bio_write(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  BioSocket* s = bio_socket(b);
  for (;;) {
    const ssize_t put = ::send(s->fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
    if (put >= 0) return static_cast<int>(put);
    if (errno == EINTR) continue;
    s->last_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}

int bio_read(BIO* b, char* buffer, int n) {
  BIO_clear_retry_flags(b);
  BioSocket* s = bio_socket(b);
  for (;;) {
    const ssize_t got = ::recv(s->fd, buffer, static_cast<size_t>(n), 0);
    if (got >= 0) return static_cast<int>(got);
    if (errno == EINTR) continue;
    s->last_errno = errno;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}

long bio_ctrl(BIO* /*b*/, int cmd, long /*num*/, void* /*ptr*/) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

// The queued OpenSSL errors as one line (and clears the queue).
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : fmt::format("error {:#x}", e);
  }
  return out;
}

SSL_SESSION* make_psk_session(SSL* ssl, const TlsContext& context) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kPskCipher);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* session = SSL_SESSION_new();
  if (session == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(session, context.psk().data(), context.psk().size()) != 1 ||
      SSL_SESSION_set_cipher(session, cipher) != 1 || SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

const TlsContext& context_of(SSL* ssl) {
  return *static_cast<const TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
}

// Client: offer the PSK. OpenSSL takes ownership of the session on every call, so each call makes a new one.
int use_psk_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* id_len, SSL_SESSION** session) {
  *session = nullptr;
  *id = nullptr;
  *id_len = 0;
  // A second call names the server's chosen hash; our PSK only fits SHA-256 suites.
  if (md != nullptr && EVP_MD_get_type(md) != NID_sha256) return 1;
  SSL_SESSION* s = make_psk_session(ssl, context_of(ssl));
  if (s == nullptr) return 0;
  *session = s;
  *id = reinterpret_cast<const unsigned char*>(kPskIdentity.data());
  *id_len = kPskIdentity.size();
  return 1;
}

// Server: accept only our identity; whether the client really holds the key is the binder check inside OpenSSL.
int find_psk_session(SSL* ssl, const unsigned char* identity, size_t identity_len, SSL_SESSION** session) {
  *session = nullptr;
  if (identity_len != kPskIdentity.size() || std::memcmp(identity, kPskIdentity.data(), identity_len) != 0) return 1;
  SSL_SESSION* s = make_psk_session(ssl, context_of(ssl));
  if (s == nullptr) return 0;
  *session = s;
  return 1;
}

// Owns the SSL object; frees it (and its BIO) before the socket closes.
class TlsStream : public Stream {
 public:
  TlsStream(std::shared_ptr<const TlsContext> context, Socket socket)
      : context_(std::move(context)), socket_(std::move(socket)) {
    bio_state_.fd = socket_.fd();
    ssl_ = SSL_new(context_->ctx());
    BIO* bio = BIO_new(context_->bio_method());
    if (ssl_ == nullptr || bio == nullptr) {
      BIO_free(bio);
      SSL_free(ssl_);
      fail("cannot create a TLS connection: {}", openssl_errors());
    }
    BIO_set_data(bio, &bio_state_);
    SSL_set_bio(ssl_, bio, bio);  // the SSL object owns the BIO from here
  }
  ~TlsStream() override { SSL_free(ssl_); }
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  SSL* ssl() const { return ssl_; }
  int last_errno() const { return bio_state_.last_errno; }

  IoResult read(void* buffer, size_t n) override {
    ERR_clear_error();
    size_t got = 0;
    const int rc = SSL_read_ex(ssl_, buffer, n, &got);
    if (rc == 1) return {IoStatus::Ok, got, {}};
    return classify(rc);
  }

  IoResult write(const void* data, size_t n) override {
    ERR_clear_error();
    size_t put = 0;
    const int rc = SSL_write_ex(ssl_, data, n, &put);
    if (rc == 1) return {IoStatus::Ok, put, {}};
    return classify(rc);
  }

  void shutdown() override {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // sends close_notify; the peer's is read by the caller's drain, if at all
    ERR_clear_error();
    ::shutdown(socket_.fd(), SHUT_WR);
  }

  bool encrypted() const override { return true; }
  int fd() const override { return socket_.fd(); }

 private:
  IoResult classify(int rc) {
    switch (SSL_get_error(ssl_, rc)) {
      case SSL_ERROR_WANT_READ:
        return {IoStatus::WantRead, 0, {}};
      case SSL_ERROR_WANT_WRITE:
        return {IoStatus::WantWrite, 0, {}};
      case SSL_ERROR_ZERO_RETURN:
        return {IoStatus::Closed, 0, {}};
      case SSL_ERROR_SYSCALL: {
        const std::string queued = openssl_errors();
        if (bio_state_.last_errno == 0 && queued.empty()) return {IoStatus::Closed, 0, {}};
        return {IoStatus::Failed, 0, bio_state_.last_errno != 0 ? std::strerror(bio_state_.last_errno) : queued};
      }
      default: {
        std::string why = openssl_errors();
        return {IoStatus::Failed, 0, "TLS: " + (why.empty() ? std::string("unknown error") : why)};
      }
    }
  }

  std::shared_ptr<const TlsContext> context_;
  Socket socket_;
  BioSocket bio_state_;
  SSL* ssl_ = nullptr;
};

}  // namespace

TlsContext::TlsContext(const ClusterKey& key, bool server)
    : server_(server), psk_(key.derive(kPskLabel)), fingerprint_(key.fingerprint()) {
  ctx_ = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  bio_method_ = BIO_meth_new(kBioType, "tessera socket");
  if (ctx_ == nullptr || bio_method_ == nullptr || BIO_meth_set_write(bio_method_, bio_write) != 1 ||
      BIO_meth_set_read(bio_method_, bio_read) != 1 || BIO_meth_set_ctrl(bio_method_, bio_ctrl) != 1 ||
      BIO_meth_set_create(bio_method_, bio_create) != 1) {
    const std::string why = openssl_errors();
    BIO_meth_free(bio_method_);
    SSL_CTX_free(ctx_);
    fail("cannot set up TLS: {}", why);
  }
  SSL_CTX_set_app_data(ctx_, this);
  SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx_, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx_, kCipherSuites);
  // Every connection authenticates with the PSK afresh: no tickets, no session cache, no early data.
  SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Without read-ahead OpenSSL reads each record's 5-byte header and its body in separate system calls.
  SSL_CTX_set_read_ahead(ctx_, 1);
  SSL_CTX_set_default_read_buffer_len(ctx_, 64u << 10);
  if (server) {
    SSL_CTX_set_psk_find_session_callback(ctx_, find_psk_session);
  } else {
    SSL_CTX_set_psk_use_session_callback(ctx_, use_psk_session);
  }
}

TlsContext::~TlsContext() {
  OPENSSL_cleanse(psk_.data(), psk_.size());
  SSL_CTX_free(ctx_);
  BIO_meth_free(bio_method_);
}

std::unique_ptr<Stream> tls_handshake(std::shared_ptr<const TlsContext> context, Socket socket, const std::string& peer,
                                      Clock::time_point deadline) {
  const bool server = context->server();
  const std::string fingerprint = context->fingerprint();
  auto stream = std::make_unique<TlsStream>(std::move(context), std::move(socket));
  SSL* ssl = stream->ssl();
  for (;;) {
    ERR_clear_error();
    const int rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (rc == 1) break;
    const int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!wait_fd(stream->fd(), err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        fail("{}: TLS handshake timed out", peer);
      }
      continue;
    }
    std::string why = openssl_errors();
    if (why.empty()) why = stream->last_errno() != 0 ? std::strerror(stream->last_errno()) : "connection closed";
    if (server) fail("authentication failed for {}: it does not hold this cluster key [TLS: {}]", peer, why);
    fail(
        "authentication failed with {}: it refused this node's cluster key (fingerprint {}); every node needs "
        "the same key file [TLS: {}]",
        peer, fingerprint, why);
  }
  // PSK mode is the only one we configured; refuse anything else defensively.
  if (SSL_session_reused(ssl) != 1) fail("authentication failed with {}: the TLS handshake did not use the key", peer);
  return stream;
}

}  // namespace tessera::net::detail
