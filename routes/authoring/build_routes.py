#!/usr/bin/env python3
"""Build the densified route files routes/<slug>.json from routes/authoring/*.json.

Standard library only. Run from the repository root:

    python3 routes/authoring/build_routes.py            # build + verify all routes
    python3 routes/authoring/build_routes.py --table    # also print a Markdown route table

Authoring format (routes/authoring/<slug>.json):

    {
      "slug": "mixco-zona1",
      "name": "Mixco – Centro Histórico",
      "depot": "Bodega Mixco",                 # exact geofence name in routes/geofences.json
      "arterials": ["Calzada Roosevelt", ...],  # informational, used for the README table
      "waypoints": [
        "free-text comment describing the next leg",
        [14.62620, -90.59320],                  # lat, lon (first point = start inside the depot)
        [14.62120, -90.55300, "Stop name"],     # a waypoint that is also a named stop
        ...
      ]
    }

The loop is closed automatically (the first waypoint is appended at the end if
the last one differs).  Every run is deterministic: re-running produces
byte-identical output, and files whose content did not change are not rewritten.
"""

import glob
import json
import math
import os
import re
import sys

EARTH_RADIUS_M = 6371008.8
MAX_STEP_M = 90.0        # densify so consecutive vertices are at most this far apart
CHECK_MAX_GAP_M = 100.0  # verification threshold on the decoded, rounded path
STOP_TOLERANCE_M = 40.0  # a stop must lie this close to some vertex of the path
DEPOT_MARGIN_M = 60.0    # the start point must be this far inside the depot border
STOP_DEPOT_CLEARANCE_M = 300.0  # no stop this close to any depot geofence
MIN_KM, MAX_KM = 12.0, 45.0
MIN_STOPS, MAX_STOPS = 4, 8

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES_DIR = os.path.dirname(HERE)
GEOFENCES = os.path.join(ROUTES_DIR, "geofences.json")


# --------------------------------------------------------------------------- geometry
def haversine_m(a, b):
    """Great-circle distance in metres between (lat, lon) points a and b."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = (math.sin((lat2 - lat1) / 2) ** 2
         + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2)
    return 2 * EARTH_RADIUS_M * math.asin(math.sqrt(h))


def to_xy(p, origin):
    """Local equirectangular projection (metres), fine at city scale."""
    k = math.pi / 180 * EARTH_RADIUS_M
    return ((p[1] - origin[1]) * k * math.cos(math.radians(origin[0])), (p[0] - origin[0]) * k)


def dist_point_segment_m(p, a, b):
    px, py = to_xy(p, p)
    ax, ay = to_xy(a, p)
    bx, by = to_xy(b, p)
    dx, dy = bx - ax, by - ay
    t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(ax + t * dx - px, ay + t * dy - py)


def point_in_ring(p, ring):
    """Ray casting; ring is a list of (lat, lon) with first == last."""
    inside = False
    for a, b in zip(ring, ring[1:]):
        if (a[0] > p[0]) != (b[0] > p[0]):
            lon_at = a[1] + (p[0] - a[0]) * (b[1] - a[1]) / (b[0] - a[0])
            if p[1] < lon_at:
                inside = not inside
    return inside


# --------------------------------------------------------------------------- geofences
class Geofence:
    """A WKT POLYGON (lon lat, closed, CCW) or a WKT POINT with radius_m."""

    def __init__(self, obj):
        self.name, self.kind = obj["name"], obj["kind"]
        wkt = obj["wkt"].strip()
        nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", wkt)]
        pts = [(nums[i + 1], nums[i]) for i in range(0, len(nums), 2)]  # -> (lat, lon)
        if wkt.upper().startswith("POINT"):
            self.center, self.radius, self.ring = pts[0], float(obj["radius_m"]), None
        elif wkt.upper().startswith("POLYGON"):
            self.center, self.radius, self.ring = None, None, pts
            if pts[0] != pts[-1]:
                raise ValueError("%s: polygon ring is not closed" % self.name)
            area2 = sum(a[1] * b[0] - b[1] * a[0] for a, b in zip(pts, pts[1:]))
            if area2 <= 0:
                raise ValueError("%s: exterior ring must be counter-clockwise" % self.name)
        else:
            raise ValueError("%s: unsupported WKT %r" % (self.name, wkt[:20]))

    def contains(self, p):
        if self.ring is None:
            return haversine_m(p, self.center) <= self.radius
        return point_in_ring(p, self.ring)

    def signed_border_distance_m(self, p):
        """Positive inside, negative outside: distance from p to the border."""
        if self.ring is None:
            return self.radius - haversine_m(p, self.center)
        d = min(dist_point_segment_m(p, a, b) for a, b in zip(self.ring, self.ring[1:]))
        return d if self.contains(p) else -d


def load_geofences():
    with open(GEOFENCES, encoding="utf-8") as f:
        return [Geofence(o) for o in json.load(f)]


# --------------------------------------------------------------------------- polyline
def encode_polyline(points):
    """Google encoded polyline, precision 5, lat first then lon."""
    out, prev = [], (0, 0)
    for lat, lon in points:
        cur = (int(round(lat * 1e5)), int(round(lon * 1e5)))
        for delta in (cur[0] - prev[0], cur[1] - prev[1]):
            v = ~(delta << 1) if delta < 0 else delta << 1
            while v >= 0x20:
                out.append(chr((0x20 | (v & 0x1F)) + 63))
                v >>= 5
            out.append(chr(v + 63))
        prev = cur
    return "".join(out)


def decode_polyline(s):
    points, i, lat, lon = [], 0, 0, 0
    while i < len(s):
        vals = []
        for _ in range(2):
            shift = result = 0
            while True:
                b = ord(s[i]) - 63
                i += 1
                result |= (b & 0x1F) << shift
                shift += 5
                if b < 0x20:
                    break
            vals.append(~(result >> 1) if result & 1 else result >> 1)
        lat += vals[0]
        lon += vals[1]
        points.append((lat / 1e5, lon / 1e5))
    return points


# --------------------------------------------------------------------------- building
def densify(waypoints):
    """Linear lat/lon interpolation so no step exceeds MAX_STEP_M; rounded to 5 decimals."""
    out = [(round(waypoints[0][0], 5), round(waypoints[0][1], 5))]
    for a, b in zip(waypoints, waypoints[1:]):
        n = max(1, math.ceil(haversine_m(a, b) / (MAX_STEP_M - 2)))  # 2 m margin for rounding
        for k in range(1, n + 1):
            t = k / n
            p = (round(a[0] + (b[0] - a[0]) * t, 5), round(a[1] + (b[1] - a[1]) * t, 5))
            if p != out[-1]:
                out.append(p)
    return out


def read_authoring(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    waypoints, stops = [], []
    for w in doc["waypoints"]:
        if isinstance(w, str):
            continue  # a comment
        p = (float(w[0]), float(w[1]))
        waypoints.append(p)
        if len(w) > 2:
            stops.append({"name": w[2], "lat": round(p[0], 5), "lon": round(p[1], 5)})
    if waypoints[-1] != waypoints[0]:
        waypoints.append(waypoints[0])  # close the loop
    return doc, waypoints, stops


def path_length_m(points):
    return sum(haversine_m(a, b) for a, b in zip(points, points[1:]))


def verify(doc, stops, polyline, geofences):
    """Return a list of problems (empty when the route is valid)."""
    problems = []
    pts = decode_polyline(polyline)
    gaps = [haversine_m(a, b) for a, b in zip(pts, pts[1:])]
    if max(gaps) > CHECK_MAX_GAP_M:
        problems.append("max gap %.1f m > %.0f m" % (max(gaps), CHECK_MAX_GAP_M))
    if pts[0] != pts[-1]:
        problems.append("first and last vertex differ")
    depots = [g for g in geofences if g.kind in ("depot", "distribution_center")]
    depot = next((g for g in depots if g.name == doc["depot"]), None)
    if depot is None:
        problems.append("depot %r is not a depot/distribution_center geofence" % doc["depot"])
    else:
        inside = depot.signed_border_distance_m(pts[0])
        if inside < DEPOT_MARGIN_M:
            problems.append("start is %.0f m inside %s (need >= %.0f m)" % (inside, depot.name, DEPOT_MARGIN_M))
    if not MIN_STOPS <= len(stops) <= MAX_STOPS:
        problems.append("%d stops (need %d..%d)" % (len(stops), MIN_STOPS, MAX_STOPS))
    km = path_length_m(pts) / 1000
    if not MIN_KM <= km <= MAX_KM:
        problems.append("length %.1f km outside %g..%g km" % (km, MIN_KM, MAX_KM))
    last = 0
    for s in stops:  # stops must appear along the path in the listed order
        p = (s["lat"], s["lon"])
        hit = next((i for i in range(last, len(pts)) if haversine_m(p, pts[i]) <= STOP_TOLERANCE_M), None)
        if hit is None:
            problems.append("stop %r not within %.0f m of the path after the previous stop" % (s["name"], STOP_TOLERANCE_M))
        else:
            last = hit
        for g in depots:
            clearance = -g.signed_border_distance_m(p)
            if clearance < STOP_DEPOT_CLEARANCE_M:
                problems.append("stop %r only %.0f m from depot %s" % (s["name"], clearance, g.name))
    return problems


def render(route):
    """Pretty JSON, 2-space indent, fixed key order, trailing newline."""
    return json.dumps(route, indent=2, ensure_ascii=False) + "\n"


def build_all():
    geofences = load_geofences()
    results, failed = [], False
    for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
        doc, waypoints, stops = read_authoring(path)
        pts = densify(waypoints)
        polyline = encode_polyline(pts)
        if decode_polyline(polyline) != pts:
            raise AssertionError("%s: polyline round-trip mismatch" % doc["slug"])
        route = {
            "slug": doc["slug"],
            "name": doc["name"],
            "depot": doc["depot"],
            "stops": stops,
            "length_km": round(path_length_m(pts) / 1000, 1),
            "polyline": polyline,
        }
        problems = verify(doc, stops, polyline, geofences)
        for msg in problems:
            print("ERROR %s: %s" % (doc["slug"], msg), file=sys.stderr)
        failed |= bool(problems)
        out_path = os.path.join(ROUTES_DIR, doc["slug"] + ".json")
        text = render(route)
        old = open(out_path, encoding="utf-8").read() if os.path.exists(out_path) else None
        if old != text:
            with open(out_path, "w", encoding="utf-8") as f:
                f.write(text)
        results.append((doc, route, len(pts)))
        print("%-30s %5.1f km  %2d stops  %4d vertices  %s" % (
            doc["slug"], route["length_km"], len(stops), len(pts), "ok" if not problems else "FAILED"))
    return results, failed


def markdown_table(results):
    rows = ["| slug | name | depot | arterials | length_km | stops |", "|---|---|---|---|---|---|"]
    for doc, route, _ in results:
        rows.append("| `%s` | %s | %s | %s | %.1f | %s |" % (
            route["slug"], route["name"], route["depot"], ", ".join(doc.get("arterials", [])),
            route["length_km"], "; ".join(s["name"] for s in route["stops"])))
    return "\n".join(rows)


if __name__ == "__main__":
    results, failed = build_all()
    if "--table" in sys.argv[1:]:
        print()
        print(markdown_table(results))
    sys.exit(1 if failed else 0)
