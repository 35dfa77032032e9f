#!/usr/bin/env bash
# Drives `fleetctl serve` with the MCP Inspector CLI 0.15, whose client is the
# TypeScript SDK 1.x: it checks structuredContent against each tool's outputSchema,
# even on errors. Every call must succeed, and every tool error must reach the caller
# as an isError result whose text is the error object (not a protocol error).
# Run by `make interop-inspector`. Usage: inspector.sh FLEETCTL_BINARY DATABASE INSPECTOR_DIR
set -euo pipefail
bin=$1 db=$2 dir=$3
inspect() { "$dir/node_modules/.bin/mcp-inspector-cli" --cli "$bin" --db "$db" serve "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

tools=$(inspect --method tools/list)
n=$(grep -c '"name": "' <<<"$tools" || true)
[ "$n" -ge 10 ] || fail "tools/list: $tools"

plate=$(inspect --method tools/call --tool-name stopped_vehicles --tool-arg min_minutes=30 | grep -o '"plate\\": \\"P-[0-9A-Z]*' | head -1 | grep -o 'P-[0-9A-Z]*') ||
  plate=$(inspect --method tools/call --tool-name list_vehicles | grep -o 'P-[0-9]\{3\}[A-Z]\{3\}' | head -1)
[ -n "$plate" ] || fail "no plate from the fleet"
for call in \
  "vehicle_position plate=$plate" "stopped_vehicles" "trip_summary plate=$plate date=yesterday" \
  "alerts" "mileage_ranking" "list_vehicles" "list_geofences" "nearest_vehicles place=Bodega_Mixco" \
  "geofence_visits plate=$plate geofence=Bodega_Mixco" "route_map plate=$plate date=yesterday" \
  "speed_chart plate=$plate date=yesterday" "fleet_map"; do
  set -- $call
  name=$1; shift
  args=()
  for a in "$@"; do args+=(--tool-arg "${a//_/ }"); done
  out=$(inspect --method tools/call --tool-name "$name" "${args[@]}") || fail "$name: $out"
  grep -q '"isError": false' <<<"$out" || fail "$name: $out"
  echo "  ok: $name"
done

for call in "trip_summary plate=P-000XXX:not_found" "nearest_vehicles lat=14.6:invalid_argument" \
            "trip_summary plate=$plate date=31/31/2026:invalid_argument"; do
  spec=${call%:*} code=${call##*:}
  set -- $spec
  name=$1; shift
  args=()
  for a in "$@"; do args+=(--tool-arg "$a"); done
  out=$(inspect --method tools/call --tool-name "$name" "${args[@]}") || fail "$name ($code) became a protocol error: $out"
  grep -q '"isError": true' <<<"$out" && grep -q "\\\\\"code\\\\\":\\\\\"$code\\\\\"" <<<"$out" || fail "$name: $out"
  echo "  ok: $name refused with $code, as a result the model reads"
done

out=$(inspect --method prompts/get --prompt-name dispatch_nearest_vehicle --prompt-args "place=Bodega Mixco") || fail "prompt: $out"
grep -q nearest_vehicles <<<"$out" || fail "prompt: $out"
echo "  ok: prompts/get"
