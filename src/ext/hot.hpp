// The path every statement takes through the hooks: its functions sit together
// in .text.hot, so that a statement whose backend's caches were emptied by the
// client and the kernel in between touches few code lines (bench/hook).
#pragma once
#define OT_HOT __attribute__((hot))

// The extension's own globals are read by the hooks every statement: hidden,
// they are addressed directly instead of through the global offset table (a
// load less each time; nothing outside the library names them).
#define OT_LOCAL __attribute__((visibility("hidden")))
