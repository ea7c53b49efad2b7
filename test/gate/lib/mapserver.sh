# Starts MapServer (cgi-mapserver as FastCGI under lighttpd) on loopback,
# serving a generated point layer "pts" as WMS and WFS. Sourced by tests and
# by scripts/gate-demo.sh.
#   ms_start DIR PORT [NPOINTS] [PUBLIC_URL]
#       -> MapServer at http://127.0.0.1:PORT/ (pid in DIR/lighttpd.pid).
#       PUBLIC_URL (the gate) is advertised in capabilities: clients such as
#       OWSLib follow those URLs, and must not be led around the gate.
#       Every request is logged in DIR/run/access.log (tests count upstream calls).
#   ms_start_postgis DIR PORT CONNECTION TABLE SRID [PUBLIC_URL]
#       -> the same, but the one layer (named TABLE) reads TABLE's "geom" from
#       PostGIS: every request becomes SQL on CONNECTION (a libpq string).
#       When that SQL fails MapServer tells the client only "Error executing
#       query. Check server logs"; the database's message (and the SQL) go to
#       DIR/run/lighttpd.err.
#   ms_write_postgis_map DIR CONNECTION TABLE SRID PUBLIC_URL
#       -> just DIR/demo.map and DIR/mapserver.conf for that layer.
#   ms_stop DIR
# Everything lives under DIR. lighttpd and mapserv run as the calling user
# (root in CI), so the files need no special permissions.

ms_write_data() {  # file npoints: a deterministic grid of points over Europe
  awk -v n="$2" 'BEGIN {
    printf "{\"type\":\"FeatureCollection\",\"features\":["
    for (i = 0; i < n; i++) {
      x = -10 + (i % 50) * 0.8; y = 35 + int(i / 50) * 0.5
      printf "%s{\"type\":\"Feature\",\"properties\":{\"id\":%d,\"name\":\"p%d\"},", (i ? "," : ""), i, i
      printf "\"geometry\":{\"type\":\"Point\",\"coordinates\":[%.3f,%.3f]}}", x, y
    }
    print "]}"
  }' >"$1"
}

# ms_layer NAME TITLE EPSG SOURCE: a point layer; SOURCE is its
# CONNECTIONTYPE/CONNECTION/DATA lines.
ms_layer() {
  cat <<EOM
  LAYER
    NAME "$1"
    TYPE POINT
    STATUS ON
$4
    PROJECTION "init=epsg:$3" END
    METADATA
      "ows_title" "$2"
      "gml_include_items" "all"
      "gml_featureid" "id"
      "wfs_enable_request" "*"
      "wms_include_items" "all"
    END
    TEMPLATE "void"
    CLASS
      STYLE SIZE 6 COLOR 200 30 30 SYMBOL 0 END
    END
  END
EOM
}

ms_ogr_layer() {  # dir: the layer "pts" over DIR/pts.geojson
  ms_layer pts points 4326 "    CONNECTIONTYPE OGR
    CONNECTION \"$1/pts.geojson\"
    DATA \"pts\""
}

# ms_postgis_layer CONNECTION TABLE SRID: a layer named TABLE over TABLE's
# "geom" column in PostGIS (CONNECTION is a libpq string). MapServer 8 turns a
# request's box into literal SQL,
#   WHERE ST_Intersects("geom", ST_GeomFromText('POLYGON((...))',SRID))
# (see doc/pricing-hook.md, "MapServer").
ms_postgis_layer() {
  ms_layer "$2" "$2" "$3" "    CONNECTIONTYPE POSTGIS
    CONNECTION \"$1\"
    DATA \"geom from $2 using unique id using srid=$3\""
}

# ms_write_map DIR PUBLIC_URL [LAYER_BLOCK [ERRORFILE]]: DIR/demo.map with
# LAYER_BLOCK (default: ms_ogr_layer DIR) and DIR/mapserver.conf sending
# MapServer's errors to ERRORFILE (default DIR/run/mapserver.log).
ms_write_map() {
  local layer errfile=${4:-$1/run/mapserver.log}
  layer=${3:-$(ms_ogr_layer "$1")}
  cat >"$1/demo.map" <<EOM
MAP
  NAME "demo"
  EXTENT -180 -90 180 90
  SIZE 256 256
  MAXSIZE 8192
  UNITS DD
  PROJECTION "init=epsg:4326" END
  IMAGETYPE png
  WEB
    METADATA
      "ows_title" "ogc_throttle demo"
      "ows_onlineresource" "$2"
      "ows_abstract" "Generated points for ogc_throttle tests"
      "ows_keywordlist" "demo,points"
      "ows_srs" "EPSG:4326 EPSG:3857"
      "ows_enable_request" "*"
      "oga_onlineresource" "${2%/}/demo/ogcapi"
      "oga_html_template_directory" "/usr/share/mapserver/ogcapi/templates/html-plain/"
      "wms_feature_info_mime_type" "text/html"
      "wfs_getfeature_formatlist" "gml,geojson"
    END
  END
  OUTPUTFORMAT
    NAME "geojson"
    DRIVER "OGR/GEOJSON"
    MIMETYPE "application/json; subtype=geojson"
    FORMATOPTION "STORAGE=stream"
    FORMATOPTION "FORM=SIMPLE"
  END
$layer
END
EOM
  cat >"$1/mapserver.conf" <<CONF
CONFIG
  ENV
    MS_MAPFILE "$1/demo.map"
    MS_ERRORFILE "$errfile"
  END
  # OGC API Features answers under /demo/ogcapi/ (PATH_INFO names the map).
  MAPS
    "demo" "$1/demo.map"
  END
END
CONF
}

ms_start() {
  local dir=$1 port=$2 n=${3:-500} public=${4:-http://127.0.0.1:$2/}
  mkdir -p "$dir/www" "$dir/run"
  dir=$(cd "$dir" && pwd)  # lighttpd chdirs to / when it daemonizes
  ms_write_data "$dir/pts.geojson" "$n"
  ms_write_map "$dir" "$public"
  ms_serve "$dir" "$port"
}

# Errors to stderr, which lighttpd writes to DIR/run/lighttpd.err at once: a
# file named in MS_ERRORFILE is written through stdio buffers that a FastCGI
# mapserv does not flush (it stayed empty in our runs).
ms_write_postgis_map() {
  ms_write_map "$1" "$5" "$(ms_postgis_layer "$2" "$3" "$4")" stderr
}

ms_start_postgis() {
  local dir=$1 port=$2 public=${6:-http://127.0.0.1:$2/}
  mkdir -p "$dir/www" "$dir/run"
  dir=$(cd "$dir" && pwd)  # lighttpd chdirs to / when it daemonizes
  ms_write_postgis_map "$dir" "$3" "$4" "$5" "$public"
  ms_serve "$dir" "$port"
}

# ms_serve DIR PORT: lighttpd with FastCGI mapserv for DIR/mapserver.conf.
ms_serve() {
  local dir=$1 port=$2
  cat >"$dir/lighttpd.conf" <<CONF
server.document-root = "$dir/www"
server.bind = "127.0.0.1"
server.port = $port
server.pid-file = "$dir/lighttpd.pid"
server.errorlog = "$dir/run/lighttpd.err"
server.modules += ("mod_fastcgi", "mod_accesslog")
accesslog.filename = "$dir/run/access.log"
fastcgi.server = ("/" => ((
  "socket" => "$dir/run/mapserv.sock",
  "bin-path" => "/usr/lib/cgi-bin/mapserv",
  "bin-environment" => ("MAPSERVER_CONFIG_FILE" => "$dir/mapserver.conf"),
  "check-local" => "disable",
  "fix-root-scriptname" => "enable",
  "max-procs" => 2
)))
CONF
  lighttpd -f "$dir/lighttpd.conf" || return 1
  local i
  for i in $(seq 1 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/?SERVICE=WMS&REQUEST=GetCapabilities" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "MapServer did not come up; see $dir/run/lighttpd.err" >&2
  return 1
}

ms_stop() {
  local dir=$1 pid pgid mine
  [ -f "$dir/lighttpd.pid" ] || return 0
  pid=$(cat "$dir/lighttpd.pid")
  # lighttpd leaves its FastCGI children behind when it stops. It daemonizes
  # into a process group of its own, shared only with them: end that group
  # (never ours). /proc rather than pgrep: procps may be absent in CI.
  pgid=$(awk '{print $5}' "/proc/$pid/stat" 2>/dev/null)
  mine=$(awk '{print $5}' /proc/$$/stat)
  kill "$pid" 2>/dev/null
  if [ -n "$pgid" ] && [ "$pgid" != "$mine" ] && [ "$pgid" -gt 1 ]; then
    kill -- "-$pgid" 2>/dev/null
    # mapserv does not always heed SIGTERM while idle in accept().
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pgid" 2>/dev/null
  fi
  rm -f "$dir/lighttpd.pid"
}

# ms_start_raster DIR PORT [PUBLIC_URL]: the "pts" layer plus "dem", a
# 1000x500 GeoTIFF over -10,35,30,45 served by WCS 1.0/2.0 (GTiff output).
# Needs gdal_create (gdal-bin).
ms_start_raster() {
  local dir=$1 port=$2 public=${3:-http://127.0.0.1:$2/}
  mkdir -p "$dir/www" "$dir/run"
  dir=$(cd "$dir" && pwd)
  ms_write_data "$dir/pts.geojson" 50
  gdal_create -q -of GTiff -outsize 1000 500 -bands 1 -ot Byte -burn 7 -a_srs EPSG:4326 \
    -a_ullr -10 45 30 35 "$dir/dem.tif" || return 1
  ms_write_map "$dir" "$public" "$(ms_ogr_layer "$dir")
  LAYER
    NAME \"dem\"
    TYPE RASTER
    STATUS ON
    DATA \"$dir/dem.tif\"
    PROJECTION \"init=epsg:4326\" END
    METADATA
      \"wcs_label\" \"dem\"
      \"wcs_rangeset_name\" \"bands\"
      \"wcs_rangeset_label\" \"bands\"
      \"wcs_enable_request\" \"*\"
      \"wcs_srs\" \"EPSG:4326\"
      \"wcs_extent\" \"-10 35 30 45\"
      \"wcs_resolution\" \"0.04 0.02\"
      \"wcs_size\" \"1000 500\"
      \"wcs_bandcount\" \"1\"
      \"wcs_formats\" \"GTiff\"
    END
  END"
  sed -i 's|^  IMAGETYPE png$|  IMAGETYPE png\n  OUTPUTFORMAT\n    NAME "GTiff"\n    DRIVER "GDAL/GTiff"\n    MIMETYPE "image/tiff"\n    IMAGEMODE BYTE\n    EXTENSION "tif"\n  END|' "$dir/demo.map"
  ms_serve "$dir" "$port"
}
