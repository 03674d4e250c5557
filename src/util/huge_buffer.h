// Anonymous memory in 2 MiB-aligned huge pages where the kernel allows them (madvise), for data that is streamed
// every token: weights read through 4 KiB page-cache pages miss the TLB on every page, huge pages do not.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Throws Error when the memory cannot be had.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() noexcept;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;    // as asked
  size_t mapped_ = 0;  // rounded up to whole huge pages
};

}  // namespace tessera
