// The density grids' shared store (ogc_throttle.density_shared_memory): one
// copy of each grid for every backend, in the main shared memory segment.
// Used by density_grid.cpp only; doc/cost-model.md ("Where grids are kept").
//
// A backend pins the grid it reads for the rest of its transaction (a
// compare-and-swap on the slot's state word, no lock); a pinned grid's memory
// is never freed or reused. Lookups, loads, replacements and evictions take the
// store's one LWLock; nothing under it can ereport but PostgreSQL's own
// release-on-error paths.
#pragma once
#include "ext/hot.hpp"
#include "ext/pg.hpp"

#include <cstddef>

extern "C" {
#include "access/attnum.h"
}

namespace ot::ext {

// kB; 0: every backend keeps its own copies (the cache of density_grid.cpp).
extern OT_LOCAL int setting_density_shared_kb;

void density_shared_request_shmem();
void density_shared_attach();
// Whether this server has the store (preloaded and the setting > 0).
bool density_shared_enabled();

struct DensityKey {
    Oid db;
    Oid relid;
    AttrNumber attnum;
};
// Which row of throttle_density a copy was read from: its inserting
// transaction (raw xmin) and the build's time.
struct DensityVersion {
    TransactionId xmin;
    TimestampTz built;
};
// A grid in the store, as this backend remembers it across transactions.
struct SharedGrid {
    int slot;
    uint32 stamp;
    const unsigned char* data;
    size_t len;
};

enum class SharedFind { Same, Other, Missing };
// The store's copy of key: at version v (then *out is set and pinned), at
// another version (*other receives it) or none.
SharedFind density_shared_find(const DensityKey& key, const DensityVersion& v, SharedGrid* out,
                               DensityVersion* other);
// Copies len bytes of data into the store as key at version v and pins it.
// An existing copy of key is replaced only when it is at *replace (nullptr:
// only when there is none); one at v already is pinned instead. Least recently
// used unpinned grids are evicted to make room. False when it does not fit or
// the store changed meanwhile: the caller keeps its own copy.
bool density_shared_publish(const DensityKey& key, const DensityVersion& v, const unsigned char* data, size_t len,
                            const DensityVersion* replace, SharedGrid* out);
// Pins g again in a later transaction: false if it was evicted or replaced since.
bool density_shared_repin(const SharedGrid& g);
void density_shared_unpin(const SharedGrid& g);

}  // namespace ot::ext
