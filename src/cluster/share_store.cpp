// ShareReceiver / cached_share: the image is written in place as the chunks arrive (no second copy), hashed in run
// order as the head hashed it, and only then named in the cache: a share cut off halfway is never found there.
#include "cluster/share_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "cluster/group_share.h"
#include "cluster/stage_assembler.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace tessera::cluster {
namespace {

std::vector<uint64_t> image_layout(const net::ShareTable& table, uint64_t& size) {
  std::vector<uint64_t> place;
  size = 0;
  for (const auto& t : table.tensors) {
    place.push_back(size);
    size += (t.n_bytes + 63) / 64 * 64;
  }
  return place;
}

std::filesystem::path share_path(const std::filesystem::path& dir, const net::Hash128& key, const char* ext) {
  return dir / fmt::format("share-{}.{}", net::hash_hex(key), ext);
}

// The tensors over an image, each at its place.
std::shared_ptr<const gguf::TensorSource> source_over(const net::ShareTable& table, const std::string& name,
                                                      const uint8_t* image, const std::vector<uint64_t>& place,
                                                      const std::shared_ptr<const void>& owner) {
  auto source = std::make_shared<AssembledSource>(name, table.model_metadata);
  for (size_t i = 0; i < table.tensors.size(); ++i) {
    source->add(table.tensors[i], {image + place[i], table.tensors[i].n_bytes}, owner);
  }
  return source;
}

}  // namespace

struct ShareReceiver::Image {
  uint8_t* data = nullptr;
  size_t size = 0;
  ~Image() {
    if (data != nullptr) ::munmap(data, size);
  }
};

std::shared_ptr<const gguf::TensorSource> cached_share(const std::filesystem::path& dir, const net::Hash128& key,
                                                       const std::string& name, std::string& problem) {
  const auto table_path = share_path(dir, key, "table");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(table_path, ec)) return nullptr;
  try {
    std::ifstream in(table_path, std::ios::binary);
    const std::vector<uint8_t> frame((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto msg = net::decode_frame(frame);
    const auto* table = std::get_if<net::ShareTable>(&msg);
    if (table == nullptr || table->key != key) fail("{} holds another share", table_path.string());
    uint64_t size = 0;
    const auto place = image_layout(*table, size);
    auto map = std::make_shared<const MappedFile>(share_path(dir, key, "bin"));
    if (map->size() != size) fail("{} has {} bytes, its table says {}", map->path(), map->size(), size);
    net::ContentHasher hasher;
    for_each_share_row(*table, [&](uint32_t tensor, uint64_t offset, uint64_t n) {
      hasher.update(map->bytes().subspan(place[tensor] + offset, n));
    });
    if (hasher.digest() != table->share_hash) fail("{}: its bytes do not match its table's hash", map->path());
    return source_over(*table, name, map->data(), place, map);
  } catch (const std::exception& e) {
    problem = e.what();
    return nullptr;
  }
}

ShareReceiver::ShareReceiver(net::ShareTable table, std::optional<std::filesystem::path> cache_dir, std::string name)
    : table_(std::move(table)), cache_dir_(std::move(cache_dir)), name_(std::move(name)) {
  uint64_t size = 0;
  place_ = image_layout(table_, size);
  // The decoder checked that each run lies inside its tensor.
  for (const auto& r : table_.runs) needed_ += r.bytes * r.count;
}

void ShareReceiver::open_image() {
  uint64_t size = 0;
  image_layout(table_, size);
  image_ = std::make_unique<Image>();
  image_->size = std::max<uint64_t>(size, 64);
  int fd = -1;
  if (cache_dir_) {
    std::filesystem::create_directories(*cache_dir_);
    const auto tmp = share_path(*cache_dir_, table_.key, "bin.tmp");
    fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("{}: cannot create the share's file: {}", tmp.string(), std::strerror(errno));
    if (::ftruncate(fd, static_cast<off_t>(image_->size)) != 0) {
      const int err = errno;
      ::close(fd);
      fail("{}: cannot size the share's file: {}", tmp.string(), std::strerror(err));
    }
  }
  void* p = fd >= 0 ? ::mmap(nullptr, image_->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                    : ::mmap(nullptr, image_->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                             -1, 0);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (p == MAP_FAILED) fail("cannot map {} bytes for the share: {}", image_->size, std::strerror(err));
  image_->data = static_cast<uint8_t*>(p);
}

ShareReceiver::~ShareReceiver() = default;

void ShareReceiver::receive(const net::WeightChunk& chunk) {
  if (chunk.hash != table_.key) fail("weight chunk of another share ({})", net::hash_hex(chunk.hash));
  if (chunk.offset != received_) fail("share chunk at byte {}, expected {}", chunk.offset, received_);
  if (chunk.data.size() > needed_ - received_) fail("the share's chunks run past its {} bytes", needed_);
  if (!image_) open_image();
  hasher_.update(chunk.data);
  size_t at = 0;
  while (at < chunk.data.size()) {
    const net::ShareRun& r = table_.runs[run_];
    const uint64_t take = std::min<uint64_t>(chunk.data.size() - at, r.bytes - in_row_);
    std::memcpy(image_->data + place_[r.tensor] + r.offset + row_ * r.stride + in_row_, chunk.data.data() + at, take);
    at += take;
    in_row_ += take;
    if (in_row_ == r.bytes) {
      in_row_ = 0;
      if (++row_ == r.count) {
        row_ = 0;
        ++run_;
      }
    }
  }
  received_ += chunk.data.size();
}

std::shared_ptr<const gguf::TensorSource> ShareReceiver::finish() {
  if (!complete()) fail("the share is incomplete: {} of {} bytes received", received_, needed_);
  if (hasher_.digest() != table_.share_hash) fail("the share arrived corrupted (content hash mismatch)");
  if (!image_) open_image();
  std::shared_ptr<Image> image(std::move(image_));
  if (cache_dir_) {
    std::filesystem::rename(share_path(*cache_dir_, table_.key, "bin.tmp"), share_path(*cache_dir_, table_.key, "bin"));
    net::ShareTable kept = table_;
    kept.group_id = 0;
    const auto frame = net::encode_frame(kept);
    const auto tmp = share_path(*cache_dir_, table_.key, "table.tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(frame.size()));
      if (!out) fail("{}: cannot write the weight cache", tmp.string());
    }
    std::filesystem::rename(tmp, share_path(*cache_dir_, table_.key, "table"));
  }
  return source_over(table_, name_, image->data, place_, image);
}

}  // namespace tessera::cluster
