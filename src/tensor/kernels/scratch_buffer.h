// Per-call scratch for the SIMD kernels, shared by every path: its members are always inlined, so each ISA's file
// gets its own copy and no out-of-line instance compiled with one path's flags can stand in for another's (the
// reason it is not a std::vector).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace tessera::kernels {

// 64-byte aligned. Decode calls a gemm per take of 16-256 rows with a few hundred bytes of activation layout:
// those live on the stack (malloc and free showed in a decode step); bigger ones on the heap.
class Scratch {
 public:
  [[gnu::always_inline]] explicit Scratch(size_t bytes)
      : p_(bytes <= sizeof local_ ? local_ : static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{64}))) {}
  [[gnu::always_inline]] ~Scratch() {
    if (p_ != local_) ::operator delete (p_, std::align_val_t{64});
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  [[gnu::always_inline]] uint8_t* get() const { return p_; }

 private:
  alignas(64) uint8_t local_[4096];
  uint8_t* p_;
};

}  // namespace tessera::kernels
