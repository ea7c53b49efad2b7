# Two clients of the area budget (test/gate/cells.t.sh), each behind its own
# X-Forwarded-For address (the gate trusts 127.0.0.1 as a proxy):
#   scrape PORT ADDR Z X0 Y0 N   every tile of an N x N block of zoom Z from
#                                (X0, Y0), as fast as one connection goes
#   pan PORT ADDR GRID CELLS STEP SEED   a walk across CELLS distinct cells of
#                                a GRID-degree grid, one map view per STEP s
# Each prints one JSON object: statuses, timings, and the refusals' texts.
import http.client, json, math, random, sys, time

def client(port):
    return http.client.HTTPConnection('127.0.0.1', port, timeout=10)

def get(c, path, addr):
    c.request('GET', path, headers={'X-Forwarded-For': addr})
    r = c.getresponse()
    body = r.read().decode('utf-8', 'replace')
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body

def scrape(port, addr, z, x0, y0, n):
    c = client(port)
    out = {'statuses': [], 'refusals': []}
    t0 = time.monotonic()
    for x in range(x0, x0 + n):
        for y in range(y0, y0 + n):
            st, h, body = get(c, '/tiles/osm/%d/%d/%d.png' % (z, x, y), addr)
            out['statuses'].append(st)
            if st != 200:
                out['refusals'].append({'status': st, 'retry_after': h.get('retry-after'),
                                        'policy': h.get('ratelimit-policy'), 'body': body})
    out['seconds'] = time.monotonic() - t0
    return out

def view(cx, cy, grid, i):
    # The view of one cell, spelt three ways in turn: WMS 1.3.0 EPSG:4326
    # (latitude first), WMS 1.1.1 EPSG:4326 and WMS 1.3.0 EPSG:3857.
    lon0, lat0 = -180 + cx * grid, -90 + cy * grid
    lon1, lat1 = lon0 + grid, lat0 + grid
    base = '/?SERVICE=WMS&REQUEST=GetMap&LAYERS=a&STYLES=&WIDTH=512&HEIGHT=512&FORMAT=image/png'
    if i % 3 == 0:
        return base + '&VERSION=1.3.0&CRS=EPSG:4326&BBOX=%.6f,%.6f,%.6f,%.6f' % (lat0, lon0, lat1, lon1)
    if i % 3 == 1:
        return base + '&VERSION=1.1.1&SRS=EPSG:4326&BBOX=%.6f,%.6f,%.6f,%.6f' % (lon0, lat0, lon1, lat1)
    mx = lambda lon: lon * 20037508.342789244 / 180
    my = lambda lat: 6378137 * math.log(math.tan(math.pi / 4 + lat * math.pi / 360))
    # A little inside the cell: the Mercator round trip must not cross its edge.
    e = grid / 100
    return base + '&VERSION=1.3.0&CRS=EPSG:3857&BBOX=%.3f,%.3f,%.3f,%.3f' % (
        mx(lon0 + e), my(lat0 + e), mx(lon1 - e), my(lat1 - e))

def pan(port, addr, grid, cells, step, seed):
    rnd = random.Random(seed)
    c = client(port)
    cx, cy = int((8.5 + 180) / grid), int((50.0 + 90) / grid)
    seen = set()
    out = {'statuses': [], 'refusals': [], 'steps': 0}
    t0 = time.monotonic()
    while len(seen) < cells and out['steps'] < 2000:
        st, h, body = get(c, view(cx, cy, grid, out['steps']), addr)
        out['statuses'].append(st)
        if st != 200:
            out['refusals'].append({'status': st, 'cell': [cx, cy], 'body': body})
        seen.add((cx, cy))
        out['steps'] += 1
        time.sleep(step)
        # Any neighbour, the one just left included: users pan back too.
        dx, dy = rnd.choice(((1, 0), (-1, 0), (0, 1), (0, -1)))
        cx, cy = cx + dx, cy + dy
    out['cells'] = len(seen)
    out['seconds'] = time.monotonic() - t0
    return out

if __name__ == '__main__':
    a = sys.argv
    if a[1] == 'scrape':
        r = scrape(int(a[2]), a[3], int(a[4]), int(a[5]), int(a[6]), int(a[7]))
    else:
        r = pan(int(a[2]), a[3], float(a[4]), int(a[5]), float(a[6]), int(a[7]))
    print(json.dumps(r))
