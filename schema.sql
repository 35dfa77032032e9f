-- fleetctl store, schema version 9 (2: latest_fix and the partial indexes; 3: imported
-- data: fractional seconds, derived speeds, unknown heading and ignition, one fix per
-- vehicle and instant; 4: positions keyed by vehicle and instant; a trip's moving and
-- idle time, a stop's time without ignition, stops and trips by time; 5: a trip's
-- odometer km and why a day's odometer was not used; 6: a day's events; 7: vehicles'
-- device ids; 8: positions in fixed-point integers under one key; 9: speed, heading
-- and ignition packed into one column. `fleetctl migrate` brings a file of version 4
-- to 8 up to date, keeping every position).
-- Times are UTC epoch seconds (INTEGER); coordinates are WGS84 degrees; units are in
-- the column names. The indexes after the marker line at the end are built after a bulk
-- load, which is several times faster than maintaining them row by row.
-- The derived tables (stops, trips, events, latest_fix, visits, daily) are rebuilt by `fleetctl
-- analyze` from the positions alone; the thresholds used are in meta.

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
    route  TEXT,                        -- the synthetic route slug it drives, if any
    speed_limit_kmh REAL,               -- its own limit (`vehicles set`); NULL: the fleet's
    device_id TEXT                      -- the id its tracker or app pushes positions with (`--device-id`); NULL: none
);
CREATE UNIQUE INDEX vehicles_device_id ON vehicles (device_id);

-- One fix per vehicle and instant, in fixed-point integers (SQLite stores each in as
-- few bytes as its value needs, and a header byte per column: about 31 bytes a fix;
-- store/positions.rs).
CREATE TABLE positions (
    -- vehicle_id × 2^42 + UTC epoch milliseconds: the table is stored in this order,
    -- so a vehicle's day is one range read, and rows written in vehicle and time
    -- order (as generate and import write them) are appended to full pages.
    vehicle_time   INTEGER PRIMARY KEY,
    lat_e7         INTEGER NOT NULL,    -- latitude × 10^7 (1.1 cm)
    lon_e7         INTEGER NOT NULL,    -- longitude × 10^7
    -- four figures in one integer, from the lowest bit: 1 bit, 1 when the source had
    -- no speed and it was derived from the fixes around it; 2 bits, the ignition (0
    -- not reported, 1 off, 2 on); 12 bits, degrees clockwise from north × 10 (4095:
    -- unknown); the rest, km/h × 100. The fixes view below unpacks it.
    motion         INTEGER NOT NULL,
    odometer_m     INTEGER              -- metres; NULL when the device has no odometer
);
-- The positions in degrees, km/h and km, for people and tools that read this file
-- (sqlite3, DuckDB); fleetctl reads the table. A filter on vehicle_id or ts here
-- reads every row: a vehicle's range is vehicle_time BETWEEN id << 42 AND
-- ((id + 1) << 42) - 1.
CREATE VIEW fixes AS SELECT
    vehicle_time >> 42 AS vehicle_id,
    (vehicle_time & 4398046511103) / 1000 AS ts,
    (vehicle_time & 4398046511103) % 1000 AS ts_ms,
    lat_e7 / 1e7 AS lat,
    lon_e7 / 1e7 AS lon,
    (motion >> 15) / 1e2 AS speed_kmh,
    motion & 1 AS speed_derived,
    nullif((motion >> 3) & 4095, 4095) / 1e1 AS heading_deg,
    nullif((motion >> 1) & 3, 0) - 1 AS ignition,
    odometer_m / 1e3 AS odometer_km
FROM positions;

-- A polygon is WKT in lon lat order: POLYGON((lon lat, lon lat, ...)), closed ring.
-- A circle is WKT POINT(lon lat) with its radius in radius_m (NULL for polygons).
CREATE TABLE geofences (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    kind     TEXT NOT NULL,             -- depot | distribution_center | zone | customer_zone
    wkt      TEXT NOT NULL,
    radius_m REAL,
    speed_limit_kmh REAL                -- a limit inside it (a school zone), NULL for none
);

-- Named places that describe where a vehicle is ("1.2 km NE of Mixco"): the demo's
-- gazetteer, or a fleet's own (GeoJSON points, GeoNames dumps) from `places import`.
CREATE TABLE places (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL,
    kind  TEXT NOT NULL,                -- zone | neighbourhood | landmark | city | ...
    lat   REAL NOT NULL,
    lon   REAL NOT NULL
);

-- A number that moves on with every change of the small tables a server keeps in
-- memory (meta, vehicles, geofences, places), moved by their triggers whoever
-- writes: when the file changed, a server reads it with the newest fix and reads
-- those tables again only if it moved (a live feed commits fixes many times a
-- second and touches none of them). A file made before it existed is read whole
-- at every change until `fleetctl migrate` adds it.
CREATE TABLE revision (
    n INTEGER NOT NULL
);
INSERT INTO revision (n) VALUES (0);
CREATE TRIGGER meta_insert_revision AFTER INSERT ON meta BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER meta_update_revision AFTER UPDATE ON meta BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER meta_delete_revision AFTER DELETE ON meta BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER vehicles_insert_revision AFTER INSERT ON vehicles BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER vehicles_update_revision AFTER UPDATE ON vehicles BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER vehicles_delete_revision AFTER DELETE ON vehicles BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER geofences_insert_revision AFTER INSERT ON geofences BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER geofences_update_revision AFTER UPDATE ON geofences BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER geofences_delete_revision AFTER DELETE ON geofences BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER places_insert_revision AFTER INSERT ON places BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER places_update_revision AFTER UPDATE ON places BEGIN UPDATE revision SET n = n + 1; END;
CREATE TRIGGER places_delete_revision AFTER DELETE ON places BEGIN UPDATE revision SET n = n + 1; END;

-- The generator's ground truth: every anomaly it planted. detail is JSON.
CREATE TABLE injected_events (
    id         INTEGER PRIMARY KEY,
    vehicle_id INTEGER NOT NULL REFERENCES vehicles(id),
    kind       TEXT NOT NULL,           -- speeding | long_stop | signal_loss | stopped_now
    start_ts   INTEGER NOT NULL,
    end_ts     INTEGER NOT NULL,
    detail     TEXT NOT NULL
);

-- ---- Derived by detection (analyze/) ------------------------------------------

CREATE TABLE stops (
    id         INTEGER PRIMARY KEY,
    vehicle_id INTEGER NOT NULL,
    start_ts   INTEGER NOT NULL,        -- first stationary fix
    end_ts     INTEGER NOT NULL,        -- last stationary fix
    lat        REAL NOT NULL,
    lon        REAL NOT NULL,
    idle_s     INTEGER NOT NULL,        -- engine on
    parked_s   INTEGER NOT NULL,        -- engine off, or not reported
    unknown_s  INTEGER NOT NULL,        -- of parked_s: the ignition not reported
    ongoing    INTEGER NOT NULL,        -- 1: still stopped at the vehicle's last fix
    place      TEXT NOT NULL
);
CREATE INDEX stops_vehicle_ts ON stops (vehicle_id, start_ts);
-- The fleet's stops and trips by time, covering what a range report counts by.
CREATE INDEX stops_ts ON stops (start_ts, vehicle_id, end_ts);
CREATE INDEX stops_lat ON stops (lat, lon, start_ts, end_ts);
CREATE INDEX stops_ongoing ON stops (vehicle_id) WHERE ongoing = 1;

CREATE TABLE trips (
    id            INTEGER PRIMARY KEY,
    vehicle_id    INTEGER NOT NULL,
    start_ts      INTEGER NOT NULL,
    end_ts        INTEGER NOT NULL,
    distance_km   REAL NOT NULL,        -- the GPS path (analyze/distance.rs)
    odometer_km   REAL,                 -- the odometer's, only when it earned its use; NULL otherwise
    gap_km        REAL NOT NULL,        -- straight line across signal losses, not in distance_km
    max_speed_kmh REAL NOT NULL,
    moving_s      INTEGER NOT NULL,     -- driving (docs/definitions.md; the column's first name)
    idle_s        INTEGER NOT NULL,     -- slower, the ignition reported on (traffic, lights)
    start_lat_e7  INTEGER NOT NULL,     -- the first fix's latitude × 10^7 (as positions keep it)
    start_lon_e7  INTEGER NOT NULL,
    end_lat_e7    INTEGER NOT NULL,     -- the last fix's
    end_lon_e7    INTEGER NOT NULL
);
CREATE INDEX trips_vehicle_ts ON trips (vehicle_id, start_ts);
CREATE INDEX trips_ts ON trips (start_ts, vehicle_id, end_ts);

-- The kinds of events, by the code events.kind keeps (store/event_kinds.rs): join
-- them for the names. A code is never renumbered.
CREATE TABLE event_kinds (
    code INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
INSERT INTO event_kinds (code, name) VALUES (1, 'speeding'), (2, 'long_stop'),
    (3, 'signal_loss'), (4, 'geofence_enter'), (5, 'geofence_exit'), (6, 'ignition_on'),
    (7, 'ignition_off');

-- detail is JSON with kind-specific figures.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY,
    vehicle_id INTEGER NOT NULL,
    kind       INTEGER NOT NULL,        -- an event_kinds code
    start_ts   INTEGER NOT NULL,
    end_ts     INTEGER NOT NULL,
    lat        REAL NOT NULL,
    lon        REAL NOT NULL,
    detail     TEXT NOT NULL
);
CREATE INDEX events_ts ON events (start_ts);
CREATE INDEX events_vehicle_ts ON events (vehicle_id, start_ts);
CREATE INDEX events_kind_ts ON events (kind, start_ts);

-- Each vehicle's newest fix, so "where is everyone now" reads one small table.
CREATE TABLE latest_fix (
    vehicle_id    INTEGER PRIMARY KEY,
    ts            INTEGER NOT NULL,
    lat           REAL NOT NULL,
    lon           REAL NOT NULL,
    speed_kmh     REAL NOT NULL,
    speed_derived INTEGER NOT NULL,
    heading_deg   REAL,
    ignition      INTEGER,
    odometer_km   REAL
);
-- The newest fix of all, which a server reads whenever the file changed.
CREATE INDEX latest_fix_ts ON latest_fix (ts);

CREATE TABLE visits (
    vehicle_id  INTEGER NOT NULL,
    geofence_id INTEGER NOT NULL,
    enter_ts    INTEGER NOT NULL,       -- first fix inside (or first fix of the data)
    exit_ts     INTEGER                 -- first fix outside again; NULL: still inside
);
CREATE INDEX visits_vehicle ON visits (vehicle_id, geofence_id, enter_ts);
-- A geofence's visits in time order (geofence_report's pages), and summed per vehicle
-- (its by_vehicle): each covers what its query reads, so neither visits the table.
CREATE INDEX visits_geofence_time ON visits (geofence_id, enter_ts, vehicle_id, exit_ts);
CREATE INDEX visits_geofence_vehicle ON visits (geofence_id, vehicle_id, enter_ts, exit_ts);

CREATE TABLE daily (
    vehicle_id           INTEGER NOT NULL,
    date                 TEXT NOT NULL,  -- local date, YYYY-MM-DD
    gps_distance_km      REAL NOT NULL,
    gap_km               REAL NOT NULL,  -- straight line across signal losses, not in gps_distance_km
    odometer_distance_km REAL,           -- NULL without an odometer, or one that did not earn its use
    odometer_rejected    TEXT,           -- decreasing | implausible: why the readings were not used
    moving_min           REAL NOT NULL,  -- driving: the day's trips' (the column's first name)
    idle_min             REAL NOT NULL,
    parked_min           REAL NOT NULL,
    trips                INTEGER NOT NULL,
    stops                INTEGER NOT NULL,
    max_speed_kmh        REAL NOT NULL,
    avg_moving_speed_kmh REAL NOT NULL,
    first_ts             INTEGER NOT NULL,
    last_ts              INTEGER NOT NULL,
    signal_losses        INTEGER NOT NULL,
    events               INTEGER NOT NULL DEFAULT 0,  -- events begun this day, every kind (range totals sum it)
    PRIMARY KEY (vehicle_id, date)
);
-- The fleet's days in date order, with the counts a range's totals sum (covered, so a
-- total reads the index alone).
CREATE INDEX daily_date_counts ON daily (date, trips, stops, events);

-- @indexes
CREATE INDEX injected_events_vehicle ON injected_events (vehicle_id, start_ts);
