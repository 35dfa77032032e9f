# fleetctl — the everyday commands. `make run` and `make test` are all a newcomer needs.
CARGO  ?= cargo
TARGET := $(or $(CARGO_TARGET_DIR),target)
# The release binary: `make build`, `make install`, benchmarks and the interop checks.
BIN    := $(TARGET)/release/fleetctl
# `make run` uses the dev build that `make test` shares: one build of the
# dependencies for both (a release build of polars alone takes longer than both).
# The dev build answers the demo in under a second; `make install` is the optimized one.
DEV_BIN := $(TARGET)/debug/fleetctl
# A fresh clone compiles once: incremental data would only cost disk and time.
DEV_CARGO := CARGO_INCREMENTAL=0 $(CARGO)
AHORA  ?= 2026-11-25T15:30
FUZZ_SECONDS ?= 600
FUZZ_TARGETS := jsonrpc_line tool_arguments wkt polyline tile csv traccar_csv traccar_json gpx geojson geonames parquet osmand traccar_forward owntracks

LIVE   := $(TARGET)/live
LIVE_ADDR ?= 127.0.0.1:5055
PG_DEMO := $(TARGET)/pg-demo
PG_DEMO_DB ?= fleetctl_demo
PG_REPLICAS ?= 127.0.0.1:8766 127.0.0.1:8767

.PHONY: build install run live pg-demo test bench lint fmt clean mcpb interop-mcpb interop-python interop-inspector interop-duckdb fuzz

build:
	$(CARGO) build --release

# Installs the release binary as ~/.cargo/bin/fleetctl (on the PATH of a rustup
# install), where `make clean` does not reach it.
install:
	$(CARGO) install --path . --locked

# Builds, generates the demo database at the default location if it is missing,
# prints a fleet overview (who is stopped now, the week's kilometres) and draws the
# best of the week: the whole fleet at the data clock (fleet-map.png), and the most
# eventful vehicle-day (speeding and signal losses count double, long stops once):
# its route (eventful-day-map.png) and its speed (eventful-day-speed.png).
run:
	$(DEV_CARGO) build
	$(DEV_BIN) generate --ahora $(AHORA) --if-missing
	@echo
	$(DEV_BIN) query stopped --format table
	@echo
	$(DEV_BIN) query mileage --format table
	@echo
	$(DEV_BIN) map --fleet -o fleet-map.png
	@set -- $$(for kind in speeding signal_loss long_stop; do $(DEV_BIN) query events --kind $$kind --format csv; done \
	  | awk -F, '$$2 == "speeding" || $$2 == "signal_loss" || $$2 == "long_stop" \
	      { day = $$1 " " substr($$3, 1, 10); score[day] += ($$2 == "long_stop") ? 1 : 2 } \
	      END { for (day in score) print score[day], day }' \
	  | sort -k1,1rn -k2,3 | head -n 1); \
	test -n "$$2" || { echo "no eventful day in the database"; exit 0; }; \
	echo "the week's most eventful vehicle-day: $$2 on $$3"; \
	$(DEV_BIN) map $$2 --date $$3 -o eventful-day-map.png && $(DEV_BIN) chart $$2 --date $$3 -o eventful-day-speed.png

# A live fleet on this machine: a new live database (its "now" the wall clock), a
# server taking positions (--ingest, unknown devices registered), and the demo
# fleet's week replayed into it in real time from now on, 15 devices at once. Ask it
# while it runs (the commands are printed); Ctrl-C stops both.
live:
	$(DEV_CARGO) build
	@mkdir -p $(LIVE)
	$(DEV_BIN) --db $(LIVE)/demo.db generate --ahora $(AHORA) --if-missing
	rm -f $(LIVE)/live.db
	$(DEV_BIN) --db $(LIVE)/live.db init --time-zone America/Guatemala
	@umask 077; od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > $(LIVE)/token; od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > $(LIVE)/ingest-token
	@trap 'kill $$server 2>/dev/null' EXIT INT TERM; \
	$(DEV_BIN) --db $(LIVE)/live.db serve --http $(LIVE_ADDR) --token-file $(LIVE)/token \
	  --ingest --ingest-token-file $(LIVE)/ingest-token --auto-register & server=$$!; \
	echo; echo "The demo fleet drives live from now on. In another terminal:"; \
	echo "  $(DEV_BIN) --db $(LIVE)/live.db query stopped"; \
	echo "  $(DEV_BIN) --db $(LIVE)/live.db map --fleet -o live-fleet.png"; \
	echo "  MCP: http://$(LIVE_ADDR)/mcp with the bearer token in $(LIVE)/token"; echo; \
	$(DEV_BIN) --db $(LIVE)/demo.db replay --to http://$(LIVE_ADDR) --start-now --devices 15 \
	  --ingest-token-file $(LIVE)/ingest-token

# The demo fleet on PostgreSQL and two `serve --http` replicas on it (docs/postgres.md).
# .ci/postgres starts the local cluster (as root it installs PostgreSQL 15 and PostGIS
# first); the database $(PG_DEMO_DB) is made anew. Ctrl-C stops the replicas.
pg-demo:
	$(DEV_CARGO) build
	@mkdir -p $(PG_DEMO)
	@server=$$(.ci/postgres) || { echo "pg-demo: no PostgreSQL server: see the lines above"; exit 1; }; \
	url="$${server%/*}/$(PG_DEMO_DB)"; \
	psql "$$server" -X -q -c "DROP DATABASE IF EXISTS $(PG_DEMO_DB) WITH (FORCE)" -c "CREATE DATABASE $(PG_DEMO_DB)" || exit 1; \
	$(DEV_BIN) --db "$$url" generate --ahora $(AHORA) || exit 1; \
	(umask 077; od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > $(PG_DEMO)/token); \
	pids=; trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	for addr in $(PG_REPLICAS); do \
	  $(DEV_BIN) --db "$$url" serve --http $$addr --token-file $(PG_DEMO)/token & pids="$$pids $$!"; \
	done; \
	echo; echo "Two replicas serve the demo fleet from PostgreSQL: $(PG_REPLICAS) (MCP at /mcp, bearer token in $(PG_DEMO)/token)."; \
	echo "In another terminal:"; \
	echo "  $(DEV_BIN) --db '$$url' query stopped"; \
	echo "  $(DEV_BIN) --db '$$url' analyze --shard 1/2 & $(DEV_BIN) --db '$$url' analyze --shard 2/2"; \
	echo "Ctrl-C stops the replicas."; echo; \
	wait

# An MCP Bundle for Claude Desktop on this platform: open fleetctl.mcpb with it (it asks
# for the database, offering the default one).
mcpb: build
	$(BIN) mcp-config --bundle fleetctl.mcpb

# The official MCPB CLI (from npm, needs the network once) validates the bundle's
# manifest against the MCPB schema and packs the unpacked bundle again.
interop-mcpb: mcpb
	rm -rf target/mcpb && mkdir -p target/mcpb
	cd target/mcpb && unzip -q ../../fleetctl.mcpb
	npx -y @anthropic-ai/mcpb validate target/mcpb/manifest.json
	npx -y @anthropic-ai/mcpb pack target/mcpb target/fleetctl-repacked.mcpb

# The PostgreSQL suite needs a server: .ci/postgres starts a local one (installing
# PostgreSQL 15 and PostGIS first when run as root) unless FLEETCTL_TEST_PG names
# one already. Without a server the suite is skipped, and said so loudly at the
# end; .ci/run sets FLEETCTL_REQUIRE_PG, which makes a skip a failure.
test:
	@if [ -z "$${FLEETCTL_TEST_PG:-}" ] && url=$$(.ci/postgres); then export FLEETCTL_TEST_PG="$$url"; fi; \
	if [ -n "$${FLEETCTL_TEST_PG:-}" ] && [ -z "$${FLEETCTL_TEST_PG_STANDBY:-}" ] && standby=$$(.ci/postgres-standby); then export FLEETCTL_TEST_PG_STANDBY="$$standby"; fi; \
	$(DEV_CARGO) test; status=$$?; \
	if [ -z "$${FLEETCTL_TEST_PG:-}" ]; then \
		echo "*** make test: the PostgreSQL suite was SKIPPED: no server could be started (.ci/postgres said why above) ***" >&2; \
	elif [ -z "$${FLEETCTL_TEST_PG_STANDBY:-}" ]; then \
		echo "*** make test: the standby tests were SKIPPED: no hot standby could be started (.ci/postgres-standby said why above) ***" >&2; \
	fi; exit $$status

# The PostgreSQL figures need a server, started as for make test (skipped without).
bench:
	@if [ -z "$${FLEETCTL_TEST_PG:-}" ] && url=$$(.ci/postgres); then export FLEETCTL_TEST_PG="$$url"; fi; \
	$(CARGO) bench --bench bench

# A second client we did not write: the official Python MCP SDK drives the release
# binary over stdio (both eras) and HTTP, and /openapi.json is validated. Needs PyPI
# once, to fill target/py-mcp.
interop-python: build
	test -x target/py-mcp/bin/python || python3 -m venv target/py-mcp
	target/py-mcp/bin/pip install -q "mcp>=2.3,<3" openapi-spec-validator
	$(BIN) --db target/interop.db generate --ahora $(AHORA) --if-missing
	target/py-mcp/bin/python tests/interop/python_client.py $(BIN) target/interop.db

# A data engine we did not write: DuckDB's Python package reads the Hive-partitioned
# Parquet datasets `fleetctl export` writes, and its km per vehicle equal `query
# mileage`. Needs PyPI once, to fill target/py-duckdb.
interop-duckdb: build
	test -x target/py-duckdb/bin/python || python3 -m venv target/py-duckdb
	target/py-duckdb/bin/pip install -q "duckdb>=1.1"
	$(BIN) --db target/interop.db generate --ahora $(AHORA) --if-missing
	mkdir -p target/interop-export
	target/py-duckdb/bin/python tests/interop/duckdb_check.py $(BIN) target/interop.db target/interop-export

# Runs each cargo-fuzz target in turn for FUZZ_SECONDS (see fuzz/README.md). Needs a
# nightly toolchain and cargo-fuzz; crashing inputs land in fuzz/artifacts/<target>/.
fuzz:
	for t in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$t && \
		$(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=1048576 || exit 1; \
	done

# A third client we did not write, the one most MCP clients are built on: the MCP
# Inspector CLI 0.15 (TypeScript SDK 1.x, Node 20), which checks structuredContent
# against each tool's outputSchema even on errors. Needs the npm registry once, to
# fill target/inspector.
interop-inspector: build
	test -x target/inspector/node_modules/.bin/mcp-inspector-cli || npm install --prefix target/inspector --no-audit --no-fund @modelcontextprotocol/inspector@0.15
	$(BIN) --db target/interop.db generate --ahora $(AHORA) --if-missing
	tests/interop/inspector.sh $(BIN) target/interop.db target/inspector

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

clean:
	$(CARGO) clean
