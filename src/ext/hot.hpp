// The path every statement takes through the hooks: its functions sit together
// in .text.hot, so that a statement whose backend's caches were emptied by the
// client and the kernel in between touches few code lines (bench/hook).
#pragma once
#define OT_HOT __attribute__((hot))
