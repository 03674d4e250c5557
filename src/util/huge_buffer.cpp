// HugeBuffer: an anonymous mapping rounded to 2 MiB with MADV_HUGEPAGE (a hint: without transparent huge pages it
// is ordinary memory, just as correct).
#include "util/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace tessera {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-allocate by one huge page so the start can be aligned to it (mmap only promises 4 KiB).
  void* p = ::mmap(nullptr, mapped_ + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} MiB for the weights: {}", bytes >> 20, std::strerror(errno));
  auto* base = static_cast<uint8_t*>(p);
  const size_t lead = (kHugePage - reinterpret_cast<uintptr_t>(base) % kHugePage) % kHugePage;
  if (lead > 0) ::munmap(base, lead);
  if (kHugePage - lead > 0) ::munmap(base + lead + mapped_, kHugePage - lead);
  data_ = base + lead;
  ::madvise(data_, mapped_, MADV_HUGEPAGE);
}

HugeBuffer::~HugeBuffer() { release(); }

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void HugeBuffer::release() noexcept {
  if (data_ != nullptr) ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

}  // namespace tessera
