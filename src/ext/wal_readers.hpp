// The WAL a process writes is read again by others, in time no session's meter
// sees: each walsender streaming it to a standby or a subscriber, and the
// archiver's command. A logical walsender of the same database also decodes
// every record and passes its changes to the output plugin, published or not.
// Measured on the machine this was built on (a primary, a physical standby and a
// logical subscriber, all local; bench/wal_readers/run.sh): a physical
// walsender spent 0.26-0.54 µs a kB of WAL, 3-13 % of the writing statement's
// own time; a logical walsender 4.8-13.7 µs a record, 0.2-5 times the
// statement's (an UPDATE of 200 000 rows: 0.6 s in the backend, 2.4 s in the
// walsender); an archive_command of cp 0.8-1.1 µs a kB. So each kB a metered process writes is charged
// ogc_throttle.wal_send_cost per walsender and ogc_throttle.wal_archive_cost
// when archiving is on, and each record ogc_throttle.wal_decode_cost per
// logical walsender of its database.
#pragma once
#include "ext/hot.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "executor/instrument.h"
}

namespace ot::ext {

struct WalMark {
    int64 records = 0;
    uint64 bytes = 0;
};

inline bool wal_moved(const WalMark& m) { return pgWalUsage.wal_records != m.records; }

// Milliseconds of reading and decoding left to the WAL's readers since the mark.
double wal_readers_ms(const WalMark& m);

inline void wal_mark(WalMark* m) {
    m->records = pgWalUsage.wal_records;
    m->bytes = pgWalUsage.wal_bytes;
}

}  // namespace ot::ext
