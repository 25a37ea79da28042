// PrivateField: a private data member of ATen's or c10's, named where they offer no call.
//
// Note [Private fields]
// ~~~~~~~~~~~~~~~~~~~~~
// The template arguments of an explicit instantiation are not access-checked ([temp.spec]/6),
// so instantiating PrivateField<Tag, &Class::member_> defines field(Tag) to return that member
// pointer. Used for a field whose type and name the version shim pins per torch version, and
// only where the owner has no call that does the same (each use says which).
#pragma once

namespace torch_npu_pinpool {
namespace {  // each file's own: its tags, its instantiations and field() stay internal to it

// Tag: a struct with `using type = T Class::*;` and `friend type field(Tag);`.
template <typename Tag, typename Tag::type kMember>
struct PrivateField {
  friend typename Tag::type field(Tag) { return kMember; }
};

}  // namespace
}  // namespace torch_npu_pinpool
