// Bucket state across restarts, in the manner of pg_stat_statements: the
// postmaster writes the table at a clean shutdown and reads it back (then
// deletes the file) at the next start. TATs are absolute times, so the time
// the server was down refills every bucket on its own.
#include <cstdio>
#include <cstring>

#include "ext/bucket_shared.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
}

namespace ot::ext {
namespace {

constexpr const char* kFile = PGSTAT_STAT_PERMANENT_DIRECTORY "/ogc_throttle.stat";
constexpr const char* kTempFile = PGSTAT_STAT_PERMANENT_DIRECTORY "/ogc_throttle.stat.tmp";
constexpr uint32 kMagic = 0x4f544231;  // "OTB1"
constexpr uint32 kFormat = 2;  // 2: TATs in nanoseconds

struct FileHeader {
    uint32 magic;
    uint32 format;
    uint32 entry_size;
    uint32 reserved;
    int64 count;
};

struct FileEntry {
    IdentityKey key;
    int64 tat_ns;
    TimestampTz last_request;
    float capacity;
    float rate;
    int32 throttled;
    int32 reserved;
};

// The postmaster's memory survives a crash-and-reinitialise cycle; a second
// attach therefore means the server crashed.
bool attached_before = false;

void save_at_exit(int code, Datum) {
    if (code != 0 || !setting_save || buckets == nullptr) return;
    FILE* f = AllocateFile(kTempFile, PG_BINARY_W);
    if (f == nullptr) {
        ereport(LOG, (errcode_for_file_access(), errmsg("ogc_throttle: could not write \"%s\": %m", kTempFile)));
        return;
    }
    const TimestampTz now = GetCurrentTimestamp();
    FileHeader h{kMagic, kFormat, sizeof(FileEntry), 0, 0};
    bool ok = fwrite(&h, sizeof h, 1, f) == 1;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, buckets);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        if (!ok || core::gcra_is_full(e->tat_ns, to_ns(now))) continue;  // full buckets carry nothing
        FileEntry fe;
        std::memset(&fe, 0, sizeof fe);
        fe.key = e->key;
        fe.tat_ns = e->tat_ns;
        fe.last_request = e->last_request;
        fe.capacity = e->capacity;
        fe.rate = e->rate;
        fe.throttled = e->throttled ? 1 : 0;
        ok = fwrite(&fe, sizeof fe, 1, f) == 1;
        if (ok) h.count++;
    }
    if (ok) ok = fseek(f, 0, SEEK_SET) == 0 && fwrite(&h, sizeof h, 1, f) == 1;
    if (FreeFile(f) != 0) ok = false;
    if (!ok) {
        ereport(LOG, (errcode_for_file_access(), errmsg("ogc_throttle: could not write \"%s\": %m", kTempFile)));
        unlink(kTempFile);
        return;
    }
    (void)durable_rename(kTempFile, kFile, LOG);
}

}  // namespace

void register_save_at_shutdown() { on_shmem_exit(save_at_exit, 0); }

void load_saved_buckets() {
    if (attached_before) {
        ereport(LOG, (errmsg("ogc_throttle: shared memory was reinitialised after a crash; every bucket starts full")));
        return;
    }
    attached_before = true;
    if (!setting_save) {
        // Not restored, and not kept for later either: stale state must not
        // come back when saving is switched on again.
        const bool discarded = unlink(kFile) == 0;
        ereport(LOG, (errmsg("ogc_throttle: ogc_throttle.save is off; every bucket starts full"),
                      discarded ? errdetail("A saved bucket file was discarded.") : 0));
        return;
    }

    FILE* f = AllocateFile(kFile, PG_BINARY_R);
    if (f == nullptr) {
        if (errno != ENOENT)
            ereport(LOG, (errcode_for_file_access(), errmsg("ogc_throttle: could not read \"%s\": %m", kFile)));
        else
            ereport(LOG, (errmsg("ogc_throttle: no saved bucket state (first start, or the last shutdown was not "
                                 "clean); every bucket starts full")));
        return;
    }
    FileHeader h;
    int64 loaded = 0, skipped = 0;
    const TimestampTz now = GetCurrentTimestamp();
    if (fread(&h, sizeof h, 1, f) != 1 || h.magic != kMagic || h.format != kFormat || h.entry_size != sizeof(FileEntry)) {
        ereport(LOG, (errmsg("ogc_throttle: ignoring \"%s\": not a bucket file of this version", kFile)));
    } else {
        for (int64 i = 0; i < h.count; i++) {
            FileEntry fe;
            if (fread(&fe, sizeof fe, 1, f) != 1) {
                ereport(LOG, (errmsg("ogc_throttle: \"%s\" is truncated; loaded what was readable", kFile)));
                break;
            }
            fe.key.bytes[kIdentityMax] = '\0';
            if (core::gcra_is_full(fe.tat_ns, to_ns(now)) || fe.key.bytes[0] == '\0') continue;
            bool found = false;
            auto* e = static_cast<BucketEntry*>(hash_search(buckets, &fe.key, HASH_ENTER_NULL, &found));
            if (e == nullptr) {
                skipped = h.count - i;
                break;
            }
            SpinLockInit(&e->mutex);
            e->tat_ns = fe.tat_ns;
            publish_tat(get_hash_value(buckets, &fe.key), fe.tat_ns);
            e->last_request = fe.last_request;
            e->capacity = fe.capacity;
            e->rate = fe.rate;
            e->throttled = fe.throttled != 0;
            loaded++;
        }
        ereport(LOG, (errmsg("ogc_throttle: restored %lld saved buckets that were not yet full", (long long)loaded),
                      skipped > 0 ? errdetail("%lld did not fit in ogc_throttle.max_identities.", (long long)skipped)
                                  : 0));
    }
    FreeFile(f);
    unlink(kFile);  // a crash before the next clean shutdown must not resurrect stale state
}

}  // namespace ot::ext
