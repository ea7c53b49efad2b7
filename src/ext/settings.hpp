// GUCs: defined once in define_settings(), read through these accessors.
#pragma once
#include "ext/hot.hpp"
#include <cstdint>

#include "core/cost_model.hpp"
#include "core/gcra.hpp"

namespace ot::ext {

void define_settings();

extern OT_LOCAL int setting_max_identities;
extern OT_LOCAL int setting_max_identity_stats;
extern OT_LOCAL bool setting_save;
extern OT_LOCAL bool setting_charge_connection;  // ogc_throttle.charge_connection
extern OT_LOCAL bool setting_charge_autovacuum;  // ogc_throttle.charge_autovacuum
extern OT_LOCAL double setting_dirty_block_cost;  // ogc_throttle.dirty_block_cost (writeback.hpp)
extern OT_LOCAL double setting_wal_send_cost;     // ogc_throttle.wal_send_cost (wal_readers.hpp)
extern OT_LOCAL double setting_wal_decode_cost;   // ogc_throttle.wal_decode_cost (wal_readers.hpp)
extern OT_LOCAL double setting_wal_archive_cost;  // ogc_throttle.wal_archive_cost (wal_readers.hpp)
extern OT_LOCAL int setting_max_samples;
extern OT_LOCAL bool setting_calibration_samples;  // ogc_throttle.calibration_samples
extern OT_LOCAL bool setting_lazy_pricing;         // ogc_throttle.lazy_pricing
extern OT_LOCAL int setting_lazy_sample_every;     // ogc_throttle.lazy_sample_every

// What the pricing hook does with a priced statement.
enum class Mode { Off, Log, Delay, Reject };

// The settings every statement reads, defined in settings.cpp: read inline (a
// call for each was a few per cent of what the hook adds to a select-only statement).
namespace guc {
extern OT_LOCAL int mode;
extern OT_LOCAL bool true_up;
extern OT_LOCAL int cutoff_grace;
extern OT_LOCAL char* identity;
extern OT_LOCAL std::uint64_t identity_assignments;
extern OT_LOCAL double capacity;
extern OT_LOCAL double rate;
}  // namespace guc

inline Mode current_mode() { return static_cast<Mode>(guc::mode); }
// The mode ogc_throttle.mode's value names (as SET reads it); false for none.
bool mode_named(const char* value, Mode* out);
std::int64_t max_delay_us();
// The identity set for this session or transaction (ogc_throttle.identity), or nullptr.
inline const char* identity_override() {
    return guc::identity != nullptr && guc::identity[0] != '\0' ? guc::identity : nullptr;
}
// Changes whenever ogc_throttle.identity is assigned.
inline std::uint64_t identity_generation() { return guc::identity_assignments; }

// Whether measured time replaces the estimate (ogc_throttle.true_up).
inline bool true_up_enabled() { return guc::true_up; }
// Milliseconds a statement may run past its budget before it is cancelled; negative: never.
inline int cutoff_grace_ms() { return guc::cutoff_grace; }

inline core::Budget current_budget() { return {guc::capacity, guc::rate}; }

// The server's own values of the settings metering reads for a role (the postmaster's: the
// configuration file's, ALTER SYSTEM's, the command line's), as of this process's fork; no
// role's or database's ALTER … SET is in them.
struct ServerSettings {
    Mode mode;
    core::Budget budget;
    bool true_up;
    int cutoff_grace_ms;
};
const ServerSettings& server_settings();
// The model prices use: the weights set by the administrator, with the
// fitted ones in their place when ogc_throttle.calibration = apply.
// Rebuilt only after one of its settings is assigned or a new fit is stored.
const core::CostModel& current_cost_model();
// The administrator's weights alone.
core::CostModel configured_cost_model();
bool calibration_applies();
double current_cost_max();

}  // namespace ot::ext
