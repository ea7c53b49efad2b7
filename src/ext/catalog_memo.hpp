// Catalogue fields the pricing walk reads for every statement, remembered per
// backend by OID: a syscache search and release each time cost about 250
// instructions, spread over cold lines. Dropped whenever the syscache entry
// could have changed (the same invalidations that drop the syscache's own).
#pragma once
#include "ext/pg.hpp"

namespace ot::ext {

// pg_class.reltuples and relpages; negative when the relation does not exist.
double memo_reltuples(Oid relid);
double memo_relpages(Oid relid);
// pg_proc.procost (readable by every role; no function is called); 0 when there is no such function.
float4 memo_procost(Oid fn);

}  // namespace ot::ext
