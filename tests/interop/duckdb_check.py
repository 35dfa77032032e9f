"""A data engine we did not write reads what `fleetctl export` writes: DuckDB's
Python package opens the Hive-partitioned Parquet datasets as they are, sees real
UTC timestamps and the partition column, and its km per vehicle (summed over the
daily rows) equal `fleetctl query mileage` over the same dates. Run by
`make interop-duckdb`; exits non-zero on the first mismatch.

Usage: duckdb_check.py FLEETCTL_BINARY DATABASE WORK_DIR
"""

import json
import subprocess
import sys

import duckdb

BINARY, DATABASE, WORK = sys.argv[1], sys.argv[2], sys.argv[3]


def fleetctl(*args: str) -> str:
    return subprocess.run(
        [BINARY, "--db", DATABASE, *args], check=True, capture_output=True, text=True
    ).stdout


daily_all = json.loads(fleetctl("query", "daily", "--format", "json"))
# The demo's week: the daily report's range, then the same dates for every file.
FROM, TO = daily_all["from"], daily_all["to"]
fleetctl("export", "daily", "--from", FROM, "--to", TO, "--format", "parquet",
         "--partition-by", "date", "-o", f"{WORK}/daily", "--force")
fleetctl("export", "positions", "--from", FROM, "--to", TO, "--format", "parquet",
         "--partition-by", "vehicle", "-o", f"{WORK}/positions", "--force")

con = duckdb.connect()
km = dict(con.execute(
    f"SELECT plate, sum(distance_km) FROM read_parquet('{WORK}/daily/*/*.parquet', "
    "hive_partitioning = true) GROUP BY plate").fetchall())
days = con.execute(
    f"SELECT count(DISTINCT date) FROM read_parquet('{WORK}/daily/*/*.parquet', "
    "hive_partitioning = true)").fetchone()[0]
assert days >= 1, days

mileage = json.loads(fleetctl("query", "mileage", "--from", FROM, "--to", TO, "--format", "json"))
ranked = {row["plate"]: row["distance_km"] for row in mileage["vehicles"]["items"]}
assert set(km) <= set(ranked), set(km) - set(ranked)
for plate, want in ranked.items():
    got = km.get(plate, 0.0)
    # Daily rows are rounded to 0.01 km each, the ranking once.
    assert abs(got - want) < 0.05, (plate, got, want)
checked = len(ranked)

kind = con.execute(
    f"SELECT typeof(time_utc) FROM read_parquet('{WORK}/positions/*/*.parquet', "
    "hive_partitioning = true) LIMIT 1").fetchone()[0]
assert kind == "TIMESTAMP WITH TIME ZONE", kind
per_plate = con.execute(
    f"SELECT plate, count(*) FROM read_parquet('{WORK}/positions/*/*.parquet', "
    "hive_partitioning = true) GROUP BY plate ORDER BY plate").fetchall()
assert len(per_plate) >= 1 and all(n > 0 for _, n in per_plate), per_plate
print(f"duckdb {duckdb.__version__}: {checked} vehicles' km over {FROM}..{TO} equal "
      f"`query mileage`; {sum(n for _, n in per_plate)} positions in {len(per_plate)} "
      f"plate= partitions, time_utc {kind}")
