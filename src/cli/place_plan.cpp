// --place in the planner's terms (place_plan.h).
#include "cli/place_plan.h"

#include "cli/place_spec.h"

namespace tessera {

std::vector<plan::PlaceStage> place_for_plan(const std::string& text, std::span<const std::string> workers,
                                             double ep_redundancy) {
  std::vector<plan::PlaceStage> out;
  for (const PlacedStage& p : parse_place(text, workers)) {
    plan::PlaceStage st;
    st.nodes = p.members;
    st.mode = p.tp && p.ep ? plan::ParallelMode::TensorExpert
              : p.ep       ? plan::ParallelMode::Expert
                           : plan::ParallelMode::Tensor;
    st.shares = p.shares;
    st.ep_redundancy = p.ep ? ep_redundancy : 0.0;
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace tessera
