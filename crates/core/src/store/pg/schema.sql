-- fleetctl on PostgreSQL + PostGIS: the tables of ../../../../../schema.sql (SQLite),
-- built for size and for many processes. Everything lives in the `fleetctl` schema,
-- so a fleet shares a database with nothing else by accident.
--
-- Valid for plain PostgreSQL, TimescaleDB and Citus alike: every key of a big table
-- begins with vehicle_id (Citus distributes by it), positions' key holds its time
-- column (a partition or a hypertable chunk is found by it), and no big table has a
-- foreign key to another vehicle's rows.
--
-- Times are UTC epoch seconds (bigint) as in SQLite; positions keep epoch
-- milliseconds. Coordinates are WGS84; units are in column names.

CREATE SCHEMA fleetctl;
SET LOCAL search_path TO fleetctl, public;

CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE vehicles (
    id              bigint PRIMARY KEY,
    plate           text NOT NULL UNIQUE,
    kind            text NOT NULL,
    driver          text NOT NULL,
    active          boolean NOT NULL,
    route           text,
    speed_limit_kmh double precision,
    device_id       text UNIQUE
);

-- One fix per vehicle and instant, the figures as SQLite keeps them (store/positions.rs):
-- × 10^7 coordinates, motion packing speed, heading, ignition and the derived-speed
-- flag, the odometer in metres. Partitioned by month of ts_ms, a partition made as
-- data arrives (positions_YYYY_MM); within one, the key orders a vehicle's fixes.
CREATE TABLE positions (
    vehicle_id bigint  NOT NULL,
    ts_ms      bigint  NOT NULL,   -- UTC epoch milliseconds
    lat_e7     integer NOT NULL,
    lon_e7     integer NOT NULL,
    motion     bigint  NOT NULL,
    odometer_m bigint,
    PRIMARY KEY (vehicle_id, ts_ms)
) PARTITION BY RANGE (ts_ms);

CREATE TABLE geofences (
    id              bigint PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    kind            text NOT NULL,
    wkt             text NOT NULL,         -- the definition, as in SQLite; containment is the project's own
    radius_m        double precision,
    speed_limit_kmh double precision,
    area            geometry(Geometry, 4326) NOT NULL   -- for a spatial index; the WKT above is what is tested
);
CREATE INDEX geofences_area ON geofences USING gist (area);

-- A number that moves on with every change of the small tables a server keeps in
-- memory (meta, vehicles, geofences, places): a server reads it before each request
-- instead of reading them again. Moved by statement triggers, so every writer
-- (fleetctl or not) moves it.
CREATE TABLE revision (
    n bigint NOT NULL
);
INSERT INTO revision (n) VALUES (0);

CREATE FUNCTION bump_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fleetctl.revision SET n = n + 1;
    RETURN NULL;
END
$$;

CREATE TABLE places (
    id   bigint PRIMARY KEY,
    name text NOT NULL,
    kind text NOT NULL,
    lat  double precision NOT NULL,
    lon  double precision NOT NULL
);

CREATE TABLE injected_events (
    vehicle_id bigint NOT NULL,
    id         bigint NOT NULL,
    kind       text NOT NULL,
    start_ts   bigint NOT NULL,
    end_ts     bigint NOT NULL,
    detail     text NOT NULL,
    PRIMARY KEY (vehicle_id, id)
);

CREATE TABLE stops (
    vehicle_id bigint NOT NULL,
    id         bigint NOT NULL,
    start_ts   bigint NOT NULL,
    end_ts     bigint NOT NULL,
    lat        double precision NOT NULL,
    lon        double precision NOT NULL,
    idle_s     bigint NOT NULL,
    parked_s   bigint NOT NULL,
    unknown_s  bigint NOT NULL,
    ongoing    boolean NOT NULL,
    place      text NOT NULL,
    PRIMARY KEY (vehicle_id, id)
);
CREATE INDEX stops_vehicle_ts ON stops (vehicle_id, start_ts);
CREATE INDEX stops_ts ON stops (start_ts, vehicle_id, end_ts);
-- Who is stopped now: a few hundred rows among hundreds of thousands.
CREATE INDEX stops_ongoing ON stops (vehicle_id) WHERE ongoing;

CREATE TABLE trips (
    vehicle_id    bigint NOT NULL,
    id            bigint NOT NULL,
    start_ts      bigint NOT NULL,
    end_ts        bigint NOT NULL,
    distance_km   double precision NOT NULL,
    odometer_km   double precision,
    gap_km        double precision NOT NULL,
    max_speed_kmh double precision NOT NULL,
    moving_s      bigint NOT NULL,
    idle_s        bigint NOT NULL,
    start_lat_e7  integer NOT NULL,
    start_lon_e7  integer NOT NULL,
    end_lat_e7    integer NOT NULL,
    end_lon_e7    integer NOT NULL,
    PRIMARY KEY (vehicle_id, id)
);
CREATE INDEX trips_vehicle_ts ON trips (vehicle_id, start_ts);
CREATE INDEX trips_ts ON trips (start_ts, vehicle_id, end_ts);

-- A reference table (Citus: on every node), the codes of store/event_kinds.rs.
CREATE TABLE event_kinds (
    code smallint PRIMARY KEY,
    name text NOT NULL UNIQUE
);
INSERT INTO event_kinds (code, name) VALUES (1, 'speeding'), (2, 'long_stop'),
    (3, 'signal_loss'), (4, 'geofence_enter'), (5, 'geofence_exit'), (6, 'ignition_on'),
    (7, 'ignition_off');

CREATE TABLE events (
    vehicle_id bigint NOT NULL,
    id         bigint NOT NULL,
    kind       smallint NOT NULL,
    start_ts   bigint NOT NULL,
    end_ts     bigint NOT NULL,
    lat        double precision NOT NULL,
    lon        double precision NOT NULL,
    detail     jsonb NOT NULL,
    PRIMARY KEY (vehicle_id, id)
);
CREATE INDEX events_ts ON events (start_ts);
CREATE INDEX events_vehicle_ts ON events (vehicle_id, start_ts);
CREATE INDEX events_kind_ts ON events (kind, start_ts);

CREATE TABLE latest_fix (
    vehicle_id    bigint PRIMARY KEY,
    ts            bigint NOT NULL,
    lat           double precision NOT NULL,
    lon           double precision NOT NULL,
    speed_kmh     double precision NOT NULL,
    speed_derived boolean NOT NULL,
    heading_deg   double precision,
    ignition      boolean,
    odometer_km   double precision
);
-- The newest fix of all, which a server reads before every request.
CREATE INDEX latest_fix_ts ON latest_fix (ts);

CREATE TABLE visits (
    vehicle_id  bigint NOT NULL,
    geofence_id bigint NOT NULL,
    enter_ts    bigint NOT NULL,
    exit_ts     bigint,
    PRIMARY KEY (vehicle_id, geofence_id, enter_ts)
);
CREATE INDEX visits_geofence_time ON visits (geofence_id, enter_ts, vehicle_id, exit_ts);

CREATE TABLE daily (
    vehicle_id           bigint NOT NULL,
    date                 date NOT NULL,
    gps_distance_km      double precision NOT NULL,
    gap_km               double precision NOT NULL,
    odometer_distance_km double precision,
    odometer_rejected    text,
    moving_min           double precision NOT NULL,
    idle_min             double precision NOT NULL,
    parked_min           double precision NOT NULL,
    trips                bigint NOT NULL,
    stops                bigint NOT NULL,
    max_speed_kmh        double precision NOT NULL,
    avg_moving_speed_kmh double precision NOT NULL,
    first_ts             bigint NOT NULL,
    last_ts              bigint NOT NULL,
    signal_losses        bigint NOT NULL,
    events               bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (vehicle_id, date)
);
CREATE INDEX daily_date_counts ON daily (date, trips, stops, events);

CREATE TRIGGER meta_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON meta
    FOR EACH STATEMENT EXECUTE FUNCTION bump_revision();
CREATE TRIGGER vehicles_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON vehicles
    FOR EACH STATEMENT EXECUTE FUNCTION bump_revision();
CREATE TRIGGER geofences_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON geofences
    FOR EACH STATEMENT EXECUTE FUNCTION bump_revision();
CREATE TRIGGER places_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON places
    FOR EACH STATEMENT EXECUTE FUNCTION bump_revision();
