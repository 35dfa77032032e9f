# fleetctl — the everyday commands. `make run` and `make test` are all a newcomer needs.
CARGO  ?= cargo
BIN    := target/release/fleetctl
AHORA  ?= 2026-11-25T15:30

.PHONY: build run test bench lint fmt clean

build:
	$(CARGO) build --release

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

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

clean:
	$(CARGO) clean
