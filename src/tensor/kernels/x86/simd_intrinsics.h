// <immintrin.h> for the files with SIMD code, with GCC 12's false warnings about its own intrinsics silenced.
#pragma once

// GCC 12 warns (-Wuninitialized) about the deliberately undefined vectors inside its own AVX-512 intrinsics once
// they are inlined; the diagnostic state at the header's lines decides, so silence it for the include only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
