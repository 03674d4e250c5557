// GGUF v3 writer: lays the file out like ggml (each tensor padded to the alignment) and streams
// tensor data through a reused buffer, writing to a temporary file that is renamed into place.
#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "gguf/gguf_cursor.h"
#include "gguf/gguf_file.h"
#include "util/error.h"

namespace tessera::gguf {

using detail::checked_add;
using detail::checked_align_up;
using detail::checked_mul;

namespace {

constexpr uint32_t kVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";

// Collects the file in memory; tensor data is filled in place.
class VectorSink {
 public:
  void write(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void zeros(size_t n) { out_.resize(out_.size() + n, 0); }
  void tensor(size_t n, const GgufWriter::Filler& filler) {
    size_t start = out_.size();
    out_.resize(start + n, 0);
    filler(std::span<uint8_t>(out_.data() + start, n));
  }
  uint64_t size() const { return out_.size(); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

// Owns the temporary file until commit() renames it over the target; otherwise the destructor removes it.
class FileSink {
 public:
  explicit FileSink(const std::filesystem::path& path) : path_(path) {
    std::string tmpl = path.string() + ".tmp.XXXXXX";
    fd_ = ::mkstemp(tmpl.data());
    if (fd_ < 0) fail("{}: cannot create a temporary file beside it: {}", path_.string(), std::strerror(errno));
    tmp_ = tmpl;
  }
  ~FileSink() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void write(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    if (buf_.size() + n > kBufferBytes) flush();
    if (n >= kBufferBytes) {
      write_all(b, n);
    } else {
      buf_.insert(buf_.end(), b, b + n);
    }
  }
  void zeros(size_t n) {
    if (buf_.size() + n > kBufferBytes) flush();
    buf_.resize(buf_.size() + n, 0);  // n < alignment, which fits 32 bits
  }
  uint64_t size() const { return written_ + buf_.size(); }
  void tensor(size_t n, const GgufWriter::Filler& filler) {
    flush();
    // One tensor's bytes at a time; the buffer is zeroed so a short filler cannot leak the previous tensor.
    data_.assign(n, 0);
    filler(std::span<uint8_t>(data_));
    write_all(data_.data(), n);
  }

  void commit() {
    flush();
    // mkstemp makes the file private (0600); a model file is normally readable by all.
    if (::fchmod(fd_, 0644) != 0) io_error("cannot set the file mode");
    if (::fsync(fd_) != 0) io_error("cannot sync");
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) io_error("cannot close");
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) io_error("cannot rename the temporary file into place");
    tmp_.clear();
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  [[noreturn]] void io_error(std::string_view what) const {
    fail("{}: {}: {}", path_.string(), what, std::strerror(errno));
  }
  void flush() {
    write_all(buf_.data(), buf_.size());
    buf_.clear();
  }
  void write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        io_error("write failed");
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
  }

  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<uint8_t> data_;
};

size_t padding(uint64_t n, uint64_t alignment) { return static_cast<size_t>((alignment - n % alignment) % alignment); }

// Validates a tensor's shape and type and returns its byte size.
uint64_t tensor_bytes(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) {
  if (name.empty()) fail("a tensor name must not be empty");
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    fail("tensor '{}': {} dimensions (must be 1 to {})", name, ne.size(), kMaxDims);
  }
  uint64_t n_elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) fail("tensor '{}': ne[{}] = {} (each dimension must be at least 1)", name, d, ne[d]);
    if (!checked_mul(n_elements, static_cast<uint64_t>(ne[d]), n_elements) ||
        n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail("tensor '{}': the element count overflows a 64-bit integer", name);
    }
  }
  const TypeTraits& traits = type_traits(type);
  if (ne[0] % traits.block_size != 0) {
    fail("tensor '{}': row length ne[0] = {} is not a multiple of the {} block size {}", name, ne[0], traits.name,
         traits.block_size);
  }
  uint64_t n_bytes = 0;
  if (!checked_mul(n_elements / static_cast<uint64_t>(traits.block_size), traits.type_size, n_bytes) ||
      n_bytes > std::numeric_limits<size_t>::max()) {
    fail("tensor '{}': the byte size overflows 64 bits", name);
  }
  return n_bytes;
}

template <typename Sink, typename T>
void put(Sink& sink, T v) {
  sink.write(&v, sizeof v);
}

template <typename Sink>
void put_string(Sink& sink, std::string_view s) {
  put<Sink, uint64_t>(sink, s.size());
  sink.write(s.data(), s.size());
}

bool integer_equals(const Value& v, uint64_t x) {
  if (!v.is_integer()) return false;
  try {
    return v.to_u64("") == x;
  } catch (const Error&) {
    return false;  // negative
  }
}

// Checks what the file cannot represent before anything is written.
void check_value(const Value& v, std::string_view key, int depth) {
  if (v.type() != ValueType::ARRAY) return;
  if (depth >= kMaxArrayDepth) fail("metadata key '{}': arrays are nested deeper than {} levels", key, kMaxArrayDepth);
  const auto& items = v.to_array(key);
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != v.array_type()) {
      fail("metadata key '{}': array element {} has type {}, but the array holds {}", key, i,
           value_type_name(items[i].type()), value_type_name(v.array_type()));
    }
    check_value(items[i], key, depth + 1);
  }
}

template <typename Sink>
void put_value(Sink& sink, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put_string(sink, x);
        } else if constexpr (std::is_same_v<T, std::vector<Value>>) {
          put<Sink, uint32_t>(sink, static_cast<uint32_t>(v.array_type()));
          put<Sink, uint64_t>(sink, x.size());
          for (const Value& item : x) put_value(sink, item);
        } else if constexpr (std::is_same_v<T, bool>) {
          put<Sink, uint8_t>(sink, x ? 1 : 0);
        } else {
          put<Sink, T>(sink, x);
        }
      },
      v.storage());
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > std::numeric_limits<uint32_t>::max()) {
    fail("GGUF alignment {} is not a power of two that fits 32 bits", alignment);
  }
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, std::vector<uint8_t> data) {
  uint64_t n_bytes = tensor_bytes(name, type, ne);
  if (data.size() != n_bytes) {
    fail("tensor '{}': {} bytes of data given, but its type and shape take {} bytes", name, data.size(), n_bytes);
  }
  auto filler = [d = std::move(data)](std::span<uint8_t> out) { std::memcpy(out.data(), d.data(), d.size()); };
  add_tensor(std::move(name), type, std::move(ne), Filler(std::move(filler)));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, Filler filler) {
  uint64_t n_bytes = tensor_bytes(name, type, ne);
  for (const auto& t : tensors_) {
    if (t.name == name) fail("tensor '{}' is added twice", name);
  }
  if (!filler) fail("tensor '{}': no data filler given", name);
  tensors_.push_back(Pending{std::move(name), type, std::move(ne), n_bytes, std::move(filler)});
}

template <typename Sink>
void GgufWriter::emit(Sink& sink) const {
  // The reader takes the alignment from general.alignment, so the key must agree with the layout.
  const Value* align_value = metadata_.find(kAlignmentKey);
  if (align_value != nullptr && !integer_equals(*align_value, alignment_)) {
    fail("metadata key '{}' is {}, but the writer aligns to {}", kAlignmentKey, align_value->describe(), alignment_);
  }
  bool add_alignment_key = align_value == nullptr && alignment_ != kDefaultAlignment;
  for (const auto& [key, value] : metadata_.entries()) {
    if (key.empty()) fail("a metadata key must not be empty");
    check_value(value, key, 0);
  }

  put<Sink, uint32_t>(sink, 0x46554747);  // "GGUF" read as little-endian
  put<Sink, uint32_t>(sink, kVersion);
  put<Sink, uint64_t>(sink, tensors_.size());
  put<Sink, uint64_t>(sink, metadata_.size() + (add_alignment_key ? 1 : 0));
  for (const auto& [key, value] : metadata_.entries()) {
    put_string(sink, key);
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(value.type()));
    put_value(sink, value);
  }
  if (add_alignment_key) {
    put_string(sink, kAlignmentKey);
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(ValueType::UINT32));
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(alignment_));
  }

  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(sink, t.name);
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<Sink, uint64_t>(sink, static_cast<uint64_t>(n));
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.type));
    put<Sink, uint64_t>(sink, offset);
    if (!checked_add(offset, t.n_bytes, offset) || !checked_align_up(offset, alignment_, offset)) {
      fail("the tensor data exceeds 64-bit offsets");
    }
  }
  // Like ggml's writers: no data section (and no padding) when there are no tensors.
  if (tensors_.empty()) return;
  sink.zeros(padding(sink.size(), alignment_));
  for (const auto& t : tensors_) {
    sink.tensor(static_cast<size_t>(t.n_bytes), t.filler);
    sink.zeros(padding(t.n_bytes, alignment_));
  }
}

void GgufWriter::write(const std::filesystem::path& path) const {
  FileSink sink(path);
  emit(sink);
  sink.commit();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  VectorSink sink;
  emit(sink);
  return sink.take();
}

}  // namespace tessera::gguf
