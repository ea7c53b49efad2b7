// Settlements not yet written to shared memory. A short statement's true-up
// (a fraction of a millisecond, either way) rides along with the identity's
// next admission, which visits the bucket anyway; whatever reaches 10 ms,
// belongs to another identity, or is left when the backend exits is written
// at once. The identity statistics' share is batched likewise.
#pragma once
#include <cstdint>

#include "ext/bucket_table.hpp"

namespace ot::ext {

// amount > 0 is owed to id's bucket (measured beyond the deposit), < 0 is
// owed back (an unused deposit).
// serial: identity_serial() of the key id was copied from (0: unknown).
void owe(const IdentityKey& id, core::Budget b, double amount, std::uint64_t serial = 0);
// A finished statement (or span): owed as above (may be 0), and its share of
// id's statistics (charge change and measured ms), with one look at the identity.
void settle(const IdentityKey& id, core::Budget b, double owed, double charge, double measured_ms,
            std::uint64_t serial = 0);
// What is still owed to id's bucket, handed over to be settled in the
// admission's own visit to the bucket (anything owed to another bucket is
// written first).
double take_owed(const IdentityKey& id, core::Budget b);
// Writes everything pending now (a settlement made while the backend exits).
void flush_settlements();

}  // namespace ot::ext
