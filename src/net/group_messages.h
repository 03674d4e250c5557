// The codecs of the group messages (GroupJoin and the rest of a --tp/--ep group's start, its collectives' data, a
// member's share) and of LoadStage's group fields, kept apart from messages.cpp. Private to net.
#pragma once

#include <type_traits>

#include "net/field_io.h"
#include "net/messages.h"

namespace tessera::net::group_codec {

// Each describes its message's fields to the encoder (checking them) or the decoder (reading and checking them).
void fields(field_io::Encoder& io, const GroupJoin& m);
void fields(field_io::Decoder& io, GroupJoin& m);
void fields(field_io::Encoder& io, const GroupReady& m);
void fields(field_io::Decoder& io, GroupReady& m);
void fields(field_io::Encoder& io, const GroupLink& m);
void fields(field_io::Decoder& io, GroupLink& m);
void fields(field_io::Encoder& io, const CollectiveData& m);
void fields(field_io::Decoder& io, CollectiveData& m);
void fields(field_io::Encoder& io, const ShareRequest& m);
void fields(field_io::Decoder& io, ShareRequest& m);
void fields(field_io::Encoder& io, const ShareAccept& m);
void fields(field_io::Decoder& io, ShareAccept& m);
void fields(field_io::Encoder& io, const ShareTable& m);
void fields(field_io::Decoder& io, ShareTable& m);

// LoadStage's last fields: the stage's group under --place (members, kind, timeout; the model's hash among them).
void load_stage_group(field_io::Encoder& io, const LoadStage& m);
void load_stage_group(field_io::Decoder& io, LoadStage& m);

// The messages whose codec lives here.
template <typename M>
inline constexpr bool kIsGroupMessage =
    std::is_same_v<M, GroupJoin> || std::is_same_v<M, GroupReady> || std::is_same_v<M, GroupLink> ||
    std::is_same_v<M, CollectiveData> || std::is_same_v<M, ShareRequest> || std::is_same_v<M, ShareAccept> ||
    std::is_same_v<M, ShareTable>;

}  // namespace tessera::net::group_codec
