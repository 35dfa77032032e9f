//! Prompts: typed, ordered scenarios that tell the model which tools to call, in
//! which order, and what to state aloud — instead of hoping it finds the sequence.

use serde_json::{Map, Value, json};

/// One argument of a prompt.
pub struct PromptArg {
    /// Name.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// Must be given.
    pub required: bool,
}

/// A prompt: its listing and how its text is made from the arguments.
pub struct Prompt {
    /// Name.
    pub name: &'static str,
    /// Title.
    pub title: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Arguments.
    pub arguments: &'static [PromptArg],
    /// The user message, given the arguments (all strings, required ones present).
    pub text: fn(&Map<String, Value>) -> String,
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str, default: &'a str) -> &'a str {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(default)
}

/// The prompts, in listing order.
pub const PROMPTS: &[Prompt] = &[
    Prompt {
        name: "daily_fleet_briefing",
        title: "Daily fleet briefing",
        description: "A dispatcher's briefing for one day: who is stopped now, the day's alerts, and each vehicle's day (km, hours, speeding).",
        arguments: &[PromptArg {
            name: "date",
            description: "YYYY-MM-DD, today or yesterday (default today)",
            required: false,
        }],
        text: |a| {
            let date = arg(a, "date", "today");
            format!(
                "Give me the fleet briefing for {date}. Use the fleetctl tools in this order:\n\
                 1. list_vehicles — note the data clock (data_now) and the time zone; say aloud which calendar date \"{date}\" resolves to.\n\
                 2. stopped_vehicles with min_minutes 30 — who is stopped now, since when, engine on or off, where; mention offline vehicles separately.\n\
                 3. alerts with from \"{date}\" and to \"{date}\" — the counts by kind and the most severe of each kind, each in its own unit (km/h over the limit, minutes stopped, minutes without fixes).\n\
                 4. daily_summary with from \"{date}\" and to \"{date}\" — per vehicle: km, first departure and last return, driving and idle hours, speeding minutes; name the three with the most km and any that never left.\n\
                 Answer in short sections. Quote plates, times (local) and places exactly as the tools return them; never estimate a number a tool did not give."
            )
        },
    },
    Prompt {
        name: "vehicle_day_review",
        title: "Review one vehicle's day",
        description: "What one vehicle did on a day: distance, departure and return, stops, speeding and signal losses.",
        arguments: &[
            PromptArg {
                name: "plate",
                description: "The vehicle's plate, e.g. P-123BCD",
                required: true,
            },
            PromptArg {
                name: "date",
                description: "YYYY-MM-DD, today or yesterday (default yesterday)",
                required: false,
            },
        ],
        text: |a| {
            let plate = arg(a, "plate", "");
            let date = arg(a, "date", "yesterday");
            format!(
                "Review the day of vehicle {plate} on {date}. Use the fleetctl tools in this order:\n\
                 1. trip_summary with plate \"{plate}\" and date \"{date}\" — say aloud the resolved date and the plate it matched; report distance_km and its distance_source, departure and return, driving/idle/parked minutes, the longest stops with their places, and max and average driving speed.\n\
                 2. alerts with plate \"{plate}\", from \"{date}\" and to \"{date}\" — list any speeding (km/h over the limit, where, when), long stops and signal losses.\n\
                 3. vehicle_position with plate \"{plate}\" — where it is now by the data clock.\n\
                 If trip_summary says has_data is false, say the vehicle has no data that day and stop. If the plate is ambiguous, ask which of the candidates is meant."
            )
        },
    },
    Prompt {
        name: "dispatch_nearest_vehicle",
        title: "Dispatch the nearest vehicle to a place",
        description: "Find which vehicle is closest to a named place and whether it can go now.",
        arguments: &[PromptArg {
            name: "place",
            description: "A depot, zone, neighbourhood or landmark, e.g. Bodega Mixco",
            required: true,
        }],
        text: |a| {
            let place = arg(a, "place", "");
            format!(
                "I need a vehicle at {place}. Use the fleetctl tools in this order:\n\
                 1. nearest_vehicles with place \"{place}\" and limit 5 — say aloud which place the server chose for \"{place}\" (its name and kind). If it answers that the name is ambiguous, show me the candidates and ask which one I mean; do not guess, and never invent coordinates.\n\
                 2. For the closest vehicle that is not offline, call vehicle_position to confirm its state, place and how long it has been stopped.\n\
                 Recommend that vehicle with its distance in km (straight line) and driver, and name the runner-up."
            )
        },
    },
    Prompt {
        name: "weekly_speeding_review",
        title: "Review a week of speeding by the limit broken",
        description: "Every speeding episode of a range, grouped by where its limit came from (a geofence's, a vehicle's own, the fleet's), with the worst per group and the drivers to talk to.",
        arguments: &[
            PromptArg {
                name: "from",
                description: "First date: YYYY-MM-DD, today or yesterday (default: 6 days before to)",
                required: false,
            },
            PromptArg {
                name: "to",
                description: "Last date (default today)",
                required: false,
            },
        ],
        text: |a| {
            let to = arg(a, "to", "today");
            let from = arg(a, "from", "");
            let range = if from.is_empty() {
                format!("the 7 days up to {to}")
            } else {
                format!("{from} to {to}")
            };
            format!(
                "Review the speeding of {range}. Use the fleetctl tools in this order:\n\
                 1. events with kind \"speeding\"{from_arg} and to \"{to}\" — fetch every page (pass next_cursor as cursor until it is null); say the exact total and the dates it resolved.\n\
                 2. Group the episodes by detail.limit_source: geofence (name each zone from detail.limit_geofence, with its limit_kmh), vehicle (its own limit), fleet (the default). For each group give the count, the total minutes (duration_s), and the worst episode by over_limit_kmh with plate, time and place.\n\
                 3. daily_summary with the same dates — the vehicles with the most speeding_min, with their drivers.\n\
                 Put episodes in a school or other limited zone first. Quote plates, times (local), limits and places exactly as the tools return them; never estimate a number a tool did not give.",
                from_arg = if from.is_empty() {
                    String::new()
                } else {
                    format!(", from \"{from}\"")
                }
            )
        },
    },
];

/// The `prompts/list` entries.
pub fn list() -> Vec<Value> {
    PROMPTS
        .iter()
        .map(|p| {
            let args: Vec<Value> = p
                .arguments
                .iter()
                .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
                .collect();
            json!({"name": p.name, "title": p.title, "description": p.description, "arguments": args})
        })
        .collect()
}

/// The `prompts/get` result, or why the request is invalid.
pub fn get(name: &str, args: &Map<String, Value>) -> Result<Value, String> {
    let prompt = PROMPTS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PROMPTS.iter().map(|p| p.name).collect();
        format!("Unknown prompt: {name}; prompts: {}", names.join(", "))
    })?;
    for a in prompt.arguments {
        match args.get(a.name) {
            Some(Value::String(s)) if !s.trim().is_empty() => {}
            None | Some(Value::Null) if !a.required => {}
            None | Some(Value::Null) => {
                return Err(format!(
                    "Missing required argument `{}` for prompt {name}",
                    a.name
                ));
            }
            Some(_) => {
                return Err(format!(
                    "Argument `{}` of prompt {name} must be a non-empty string",
                    a.name
                ));
            }
        }
    }
    if let Some(extra) = args
        .keys()
        .find(|k| !prompt.arguments.iter().any(|a| a.name == k.as_str()))
    {
        return Err(format!("Unknown argument `{extra}` for prompt {name}"));
    }
    Ok(json!({
        "description": prompt.description,
        "messages": [{"role": "user", "content": {"type": "text", "text": (prompt.text)(args)}}],
    }))
}
