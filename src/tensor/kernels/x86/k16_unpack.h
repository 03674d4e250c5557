// The level unpackers of the k16 panels (Q2_K, Q3_K, Q6_K; panels_k16.cpp of each ISA), written once for every
// vector width: a unit's vectors v to the group's level vectors lv (byte 4r + i of vector c: element 4c + i of row r).
// The bit layouts: k16_panel_rows.h. Each ISA's panels_k16.cpp instantiates them with its width traits V:
//   V::Int, V::and_(a, b), V::template srli16<n>(a), V::set1_8(b), V::or_and(a, b, mask) = a | (b & mask).
// Always inlined, so each path's file gets its own code.
#pragma once

namespace tessera::kernels::x86 {

template <class V>
struct K16Unpack {
  using I = typename V::Int;

  // Q6_K, one group per unit of 3 vectors: their low 6 bits, and the top 2 bits of each gathered into a fourth.
  [[gnu::always_inline]] static void q6(const I* v, I* lv) {
    const I m6 = V::set1_8(0x3f);
    I top = V::and_(V::template srli16<6>(v[0]), V::set1_8(0x03));
    top = V::or_and(top, V::template srli16<4>(v[1]), V::set1_8(0x0c));
    top = V::or_and(top, V::template srli16<2>(v[2]), V::set1_8(0x30));
    for (int k = 0; k < 3; ++k) lv[k] = V::and_(v[k], m6);
    lv[3] = top;
  }

  // Q3_K, two groups per unit of 3 vectors. 16-bit shifts carry bits across bytes only into positions the masks drop.
  [[gnu::always_inline]] static void q3(const I* v, I* lv) {
    const I m7 = V::set1_8(0x07);
    lv[0] = V::and_(v[0], m7);
    lv[1] = V::and_(V::template srli16<3>(v[0]), m7);
    lv[2] = V::and_(v[1], m7);
    lv[3] = V::and_(V::template srli16<3>(v[1]), m7);
    lv[4] = V::and_(v[2], m7);
    lv[5] = V::and_(V::template srli16<3>(v[2]), m7);
    lv[6] =
        V::or_and(V::and_(V::template srli16<6>(v[0]), V::set1_8(0x03)), V::template srli16<4>(v[1]), V::set1_8(0x04));
    lv[7] =
        V::or_and(V::and_(V::template srli16<7>(v[1]), V::set1_8(0x01)), V::template srli16<5>(v[2]), V::set1_8(0x06));
  }

  // Q2_K, one group per unit of 1 vector.
  [[gnu::always_inline]] static void q2(const I* v, I* lv) {
    const I m3 = V::set1_8(0x03);
    lv[0] = V::and_(v[0], m3);
    lv[1] = V::and_(V::template srli16<2>(v[0]), m3);
    lv[2] = V::and_(V::template srli16<4>(v[0]), m3);
    lv[3] = V::and_(V::template srli16<6>(v[0]), m3);
  }
};

}  // namespace tessera::kernels::x86
