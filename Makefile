# fleetctl — the everyday commands. `make run` and `make test` are all a newcomer needs.
CARGO  ?= cargo
BIN    := $(or $(CARGO_TARGET_DIR),target)/release/fleetctl
AHORA  ?= 2026-11-25T15:30
FUZZ_SECONDS ?= 600
FUZZ_TARGETS := jsonrpc_line tool_arguments wkt polyline tile csv traccar_csv traccar_json gpx geojson geonames parquet

.PHONY: build install run test bench lint fmt clean interop-python interop-inspector interop-duckdb fuzz

build:
	$(CARGO) build --release

# Installs the release binary as ~/.cargo/bin/fleetctl (on the PATH of a rustup
# install), where `make clean` does not reach it.
install:
	$(CARGO) install --path . --locked

# Builds, generates the demo database at the default location if it is missing,
# prints a fleet overview (who is stopped now, the week's kilometres) and draws
# yesterday's route of the week's busiest vehicle to fleet-map.png.
run: build
	$(BIN) generate --ahora $(AHORA) --if-missing
	@echo
	$(BIN) query stopped --format table
	@echo
	$(BIN) query mileage --format table
	@echo
	$(BIN) map $$($(BIN) query mileage --format csv | sed -n 2p | cut -d, -f2) --date yesterday -o fleet-map.png

test:
	$(CARGO) test

bench:
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
