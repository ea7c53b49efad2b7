// GUCs: defined once in define_settings(), read through these accessors.
#pragma once
#include <cstdint>

#include "core/cost_model.hpp"
#include "core/gcra.hpp"

namespace ot::ext {

void define_settings();

extern int setting_max_identities;
extern int setting_max_identity_stats;
extern bool setting_save;
extern bool setting_charge_connection;  // ogc_throttle.charge_connection
extern int setting_max_samples;

// What the pricing hook does with a priced statement.
enum class Mode { Off, Log, Delay, Reject };
Mode current_mode();
std::int64_t max_delay_us();
// The identity set for this session or transaction (ogc_throttle.identity), or nullptr.
const char* identity_override();
// Changes whenever ogc_throttle.identity is assigned.
std::uint64_t identity_generation();

// Whether measured time replaces the estimate (ogc_throttle.true_up).
bool true_up_enabled();
// Milliseconds a statement may run past its budget before it is cancelled; negative: never.
int cutoff_grace_ms();

core::Budget current_budget();
// The model prices use: the weights set by the administrator, with the
// fitted ones in their place when ogc_throttle.calibration = apply.
core::CostModel current_cost_model();
// The administrator's weights alone.
core::CostModel configured_cost_model();
bool calibration_applies();
double current_cost_max();

}  // namespace ot::ext
