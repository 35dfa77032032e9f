-- fleetctl store, schema version 1.
-- Times are UTC epoch seconds (INTEGER); coordinates are WGS84 degrees; units are in
-- the column names. The tables below the `-- @indexes` line are built after a bulk
-- load, which is several times faster than maintaining them row by row.
-- Reserved for the derived tables of detection: trips, stops, events, daily.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE vehicles (
    id     INTEGER PRIMARY KEY,
    plate  TEXT NOT NULL UNIQUE,        -- P-123BCD
    kind   TEXT NOT NULL,               -- truck | van | pickup | minibus
    driver TEXT NOT NULL,
    active INTEGER NOT NULL,            -- 0: out of service, no positions
    route  TEXT                         -- the synthetic route slug it drives, if any
);

CREATE TABLE positions (
    vehicle_id  INTEGER NOT NULL REFERENCES vehicles(id),
    ts          INTEGER NOT NULL,       -- UTC epoch seconds
    lat         REAL NOT NULL,
    lon         REAL NOT NULL,
    speed_kmh   REAL NOT NULL,
    heading_deg REAL NOT NULL,          -- clockwise from north, [0, 360)
    ignition    INTEGER NOT NULL,       -- 1 on, 0 off
    odometer_km REAL                    -- NULL when the device has no odometer
);

-- A polygon is WKT in lon lat order: POLYGON((lon lat, lon lat, ...)), closed ring.
-- A circle is WKT POINT(lon lat) with its radius in radius_m (NULL for polygons).
CREATE TABLE geofences (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    kind     TEXT NOT NULL,             -- depot | distribution_center | zone | customer_zone
    wkt      TEXT NOT NULL,
    radius_m REAL
);

-- The generator's ground truth: every anomaly it planted. detail is JSON.
CREATE TABLE injected_events (
    id         INTEGER PRIMARY KEY,
    vehicle_id INTEGER NOT NULL REFERENCES vehicles(id),
    kind       TEXT NOT NULL,           -- speeding | long_stop | signal_loss | stopped_now
    start_ts   INTEGER NOT NULL,
    end_ts     INTEGER NOT NULL,
    detail     TEXT NOT NULL
);

-- @indexes
CREATE INDEX positions_vehicle_ts ON positions (vehicle_id, ts);
CREATE INDEX positions_ts ON positions (ts);
CREATE INDEX injected_events_vehicle ON injected_events (vehicle_id, start_ts);
