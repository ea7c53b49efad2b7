#include "gate/inimage.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include <gd.h>
#include <gdfonts.h>

#include <memory>
#include <vector>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

constexpr std::size_t kCacheEntries = 16;
// About a second of one core's drawing (a 2048 x 2048 PNG takes ~20 ms).
constexpr double kDrawPixelsPerSecond = 64e6;

struct ImageCache {
    std::vector<std::pair<std::string, Rendered>> entries;  // most recent first
    double budget = kDrawPixelsPerSecond;
    std::chrono::steady_clock::time_point refilled = std::chrono::steady_clock::now();
    std::uint64_t draws = 0;
};

ImageCache& image_cache() {
    thread_local ImageCache c;
    return c;
}

std::string upper(std::string_view v) {
    std::string s(v);
    for (char& ch : s)
        if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    return s;
}

const Param* param(const OgcRequest& r, std::string_view key) { return r.query.find(key); }

// Greedy word wrap to `cols` characters; long words are cut.
std::vector<std::string> wrap(const std::string& text, std::size_t cols) {
    std::vector<std::string> lines;
    std::string line;
    for (std::string_view word : split(text, ' ')) {
        std::string w(word);
        while (w.size() > cols) {
            if (!line.empty()) lines.push_back(std::move(line)), line.clear();
            lines.push_back(w.substr(0, cols));
            w = w.substr(cols);
        }
        if (w.empty()) continue;
        if (!line.empty() && line.size() + 1 + w.size() > cols) lines.push_back(std::move(line)), line.clear();
        line += (line.empty() ? "" : " ") + w;
    }
    if (!line.empty()) lines.push_back(std::move(line));
    return lines;
}

}  // namespace

ImageExceptions image_exceptions(const OgcRequest& r) {
    if (r.service != Service::Wms || r.op != Op::GetMap) return ImageExceptions::None;
    const Param* p = param(r, "EXCEPTIONS");
    if (!p) return ImageExceptions::None;
    const std::string v = upper(p->value);
    // 1.1.1: application/vnd.ogc.se_inimage / se_blank; 1.3.0: INIMAGE / BLANK.
    if (v.find("INIMAGE") != std::string::npos) return ImageExceptions::InImage;
    if (v.find("BLANK") != std::string::npos) return ImageExceptions::Blank;
    return ImageExceptions::None;
}

std::optional<Rendered> render_in_image(const OgcRequest& r, const Config& c, const std::string& text, int status) {
    const ImageExceptions kind = image_exceptions(r);
    if (kind == ImageExceptions::None || !r.width || !r.height) return std::nullopt;
    const auto w = parse_int(*r.width), h = parse_int(*r.height);
    if (!w || !h || *w <= 0 || *h <= 0) return std::nullopt;
    // Divisions, not a product: WIDTH×HEIGHT may overflow.
    if (*w > c.caps.max_pixels / *h || *w > c.limits.inimage_max_pixels / *h) return std::nullopt;
    if (c.caps.max_side > 0 && (*w > c.caps.max_side || *h > c.caps.max_side)) return std::nullopt;

    const Param* fmt = param(r, "FORMAT");
    const std::string f = fmt ? upper(fmt->value) : "";
    const bool jpeg = f.find("JPEG") != std::string::npos || f.find("JPG") != std::string::npos;
    const bool gif = f.find("GIF") != std::string::npos;
    const Param* tp = param(r, "TRANSPARENT");
    const bool transparent = kind == ImageExceptions::Blank || (tp && upper(tp->value) == "TRUE");

    // Drawing costs ~10x an XML report: the last few images are kept (a
    // throttled map client asks for the same size again and again), and
    // what is drawn afresh is bounded per thread and second; past that the
    // XML report stands, so refusals cannot be made into load.
    const char kind_c = kind == ImageExceptions::Blank ? 'b' : 'i';
    std::string key;
    key.reserve(text.size() + 32);
    key += kind_c;
    key += jpeg ? 'j' : gif ? 'g' : 'p';
    key += transparent ? 't' : 'o';
    key += std::to_string(*w) + "x" + std::to_string(*h) + ":" + std::to_string(status) + ":";
    if (kind == ImageExceptions::InImage) key += text;
    ImageCache& cache = image_cache();
    for (std::size_t i = 0; i < cache.entries.size(); ++i)
        if (cache.entries[i].first == key) {
            if (i > 0) std::swap(cache.entries[i], cache.entries[0]);
            return cache.entries[0].second;
        }
    const auto now = std::chrono::steady_clock::now();
    const double pixels = static_cast<double>(*w) * static_cast<double>(*h);
    cache.budget = std::min(kDrawPixelsPerSecond,
                            cache.budget + kDrawPixelsPerSecond * std::chrono::duration<double>(now - cache.refilled).count());
    cache.refilled = now;
    if (pixels > cache.budget) return std::nullopt;
    cache.budget -= pixels;
    ++cache.draws;

    // A palette image: one byte a pixel, and fast to compress when uniform.
    std::unique_ptr<gdImage, void (*)(gdImagePtr)> im(gdImageCreate(static_cast<int>(*w), static_cast<int>(*h)),
                                                     gdImageDestroy);
    if (!im) return std::nullopt;
    const int bg = gdImageColorAllocate(im.get(), 255, 255, 255);  // the first colour fills the image
    if (transparent && !jpeg) gdImageColorTransparent(im.get(), bg);
    if (kind == ImageExceptions::InImage) {
        const int ink = gdImageColorAllocate(im.get(), 160, 0, 0);
        gdFontPtr font = gdFontGetSmall();
        const std::size_t cols = static_cast<std::size_t>(std::max<long long>(*w - 8, font->w) / font->w);
        int y = 4;
        for (const std::string& line : wrap(text, cols)) {
            if (y > *h) break;
            std::string s = line;
            gdImageString(im.get(), font, 4, y, reinterpret_cast<unsigned char*>(s.data()), ink);
            y += font->h + 2;
        }
    }
    int size = 0;
    void* data = jpeg ? gdImageJpegPtr(im.get(), &size, 80) : gif ? gdImageGifPtr(im.get(), &size)
                                                                 : gdImagePngPtr(im.get(), &size);
    if (!data) return std::nullopt;
    std::string body(static_cast<const char*>(data), static_cast<std::size_t>(size));
    gdFree(data);
    Rendered out{status, jpeg ? "image/jpeg" : gif ? "image/gif" : "image/png", std::move(body)};
    if (cache.entries.size() >= kCacheEntries) cache.entries.pop_back();
    cache.entries.emplace(cache.entries.begin(), std::move(key), out);
    return out;
}

std::uint64_t inimage_draws() { return image_cache().draws; }

}  // namespace ot::gate
