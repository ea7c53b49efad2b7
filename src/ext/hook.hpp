// The pricing hook: every statement is priced at ExecutorStart (with this
// execution's parameter values) and charged according to ogc_throttle.mode.
#pragma once

namespace ot::ext {
void install_hooks();
}
