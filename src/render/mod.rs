//! Presentation for people: text summaries and tables. Never touches the store.

use crate::synth::GenerateSummary;
use std::fmt::Write;

/// Groups digits by thousands: `214332` → `214,332`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The summary `fleetctl generate` prints when it is done.
pub fn generate_summary(s: &GenerateSummary) -> String {
    let mut out = String::new();
    let inactive = s.vehicles - s.active_vehicles;
    let _ = writeln!(out, "Generated {} in {:.2} s", s.path.display(), s.seconds);
    let _ = writeln!(
        out,
        "  vehicles   {} ({} active, {inactive} out of service)",
        s.vehicles, s.active_vehicles
    );
    let days = s.last_date.days_since_epoch() - s.first_date.days_since_epoch() + 1;
    let _ = writeln!(
        out,
        "  days       {days}: {} to {} (data clock {})",
        s.first_date, s.last_date, s.now
    );
    let _ = writeln!(out, "  positions  {}", thousands(s.positions));
    let planted: Vec<String> = s
        .planted
        .iter()
        .map(|(k, n)| format!("{} {n}", k.as_str()))
        .collect();
    let _ = writeln!(out, "  planted    {}", planted.join(", "));
    for note in &s.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(214_332), "214,332");
        assert_eq!(thousands(60_000_000), "60,000,000");
    }
}
