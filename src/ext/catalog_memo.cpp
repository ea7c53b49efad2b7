#include "ext/catalog_memo.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

// Direct-mapped, plain data (nothing with a destructor). A slot's oid 0: empty.
constexpr int kSlots = 64;
struct RelSlot {
    Oid relid;
    double reltuples, relpages;
};
struct ProcSlot {
    Oid fn;
    float4 procost;
};
struct Memo {
    bool registered;
    RelSlot rels[kSlots];
    ProcSlot procs[kSlots];
};
Memo memo;

// Any change of pg_class or pg_proc forgets every entry of that catalogue: the
// walk reads a handful, and changes (ANALYZE, VACUUM, DDL) are rare next to statements.
void forget_rels(Datum, int, uint32) {
    for (RelSlot& s : memo.rels) s.relid = InvalidOid;
}
void forget_procs(Datum, int, uint32) {
    for (ProcSlot& s : memo.procs) s.fn = InvalidOid;
}

void register_callbacks() {
    if (memo.registered) return;
    CacheRegisterSyscacheCallback(RELOID, forget_rels, 0);
    CacheRegisterSyscacheCallback(PROCOID, forget_procs, 0);
    memo.registered = true;
}

int slot_of(Oid oid) { return static_cast<int>((static_cast<uint32>(oid) * 2654435761u) >> 26); }  // 6 bits

const RelSlot& rel(Oid relid) {
    RelSlot& s = memo.rels[slot_of(relid)];
    if (s.relid == relid && OidIsValid(relid)) return s;
    register_callbacks();
    // A catalogue read takes a lock, which processes pending invalidations: any that arrive during
    // the search come before what it reads, so the slot is filled after it.
    double tuples = -1, pages = -1;
    HeapTuple t = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (HeapTupleIsValid(t)) {
        const auto* c = reinterpret_cast<Form_pg_class>(GETSTRUCT(t));
        tuples = c->reltuples;
        pages = c->relpages;
        ReleaseSysCache(t);
    }
    s = {relid, tuples, pages};
    return s;
}

}  // namespace

double memo_reltuples(Oid relid) { return rel(relid).reltuples; }
double memo_relpages(Oid relid) { return rel(relid).relpages; }

float4 memo_procost(Oid fn) {
    ProcSlot& s = memo.procs[slot_of(fn)];
    if (s.fn == fn && OidIsValid(fn)) return s.procost;
    register_callbacks();
    float4 cost = 0;
    HeapTuple t = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
    if (HeapTupleIsValid(t)) {
        cost = reinterpret_cast<Form_pg_proc>(GETSTRUCT(t))->procost;
        ReleaseSysCache(t);
    }
    s = {fn, cost};
    return cost;
}

}  // namespace ot::ext
