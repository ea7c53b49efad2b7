// WMS EXCEPTIONS=INIMAGE / BLANK: a refusal as a picture of the size asked
// for, the only way a browser map (an <img> per tile) can show its user why.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "gate/config.hpp"
#include "gate/ogc_error.hpp"
#include "gate/request.hpp"

namespace ot::gate {

enum class ImageExceptions : std::uint8_t { None, InImage, Blank };

// What a WMS GetMap asked for in EXCEPTIONS (1.1.1 MIME types or 1.3.0 names).
ImageExceptions image_exceptions(const OgcRequest& r);

// The refusal drawn into an image (BLANK: transparent, no text) in the
// requested FORMAT (PNG, JPEG or GIF; PNG otherwise), keeping `status`; or
// nullopt when the request did not ask for it or its size is not within the
// caps and limits.inimage_max_pixels (then the XML answer stands).
// The last images are served from a per-thread cache, and fresh drawing is
// bounded per thread and second (past it: nullopt, the XML answer).
std::optional<Rendered> render_in_image(const OgcRequest& r, const Config& c, const std::string& text, int status);

// Images drawn (not served from the cache) on this thread; for tests.
std::uint64_t inimage_draws();

}  // namespace ot::gate
