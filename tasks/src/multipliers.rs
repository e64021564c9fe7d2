//! Harbor's five timeout multipliers, one type for the command line, the records and the
//! deadlines.
//!
//! Harbor scales each phase deadline by that phase's multiplier when it is set, else by the
//! global one. The same five fields appear in the job config, every trial config and the lock,
//! always under Harbor's names, so this struct is `#[serde(flatten)]`ed into those records and
//! (with the `clap` feature) `#[command(flatten)]`ed into `runner run`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The largest multiplier accepted on the command line: any real need is far below it, and
/// it keeps every scaled deadline (at most a week by task validation) representable.
pub const MAX_MULTIPLIER: f64 = 1000.0;

/// The global and per-phase timeout multipliers of a job (leaderboards require the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Multipliers {
    // Each field is named as Harbor names it, so the serde key, the clap id and the flag
    // (`--agent-timeout-multiplier`) all come from the one name.
    /// Multiplies every phase timeout that has no multiplier of its own (not allowed on
    /// leaderboards).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FACTOR", default_value_t = 1.0, value_parser = parse_multiplier))]
    pub timeout_multiplier: f64,
    /// Multiplies the agent timeout (not allowed on leaderboards).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FACTOR", value_parser = parse_multiplier))]
    pub agent_timeout_multiplier: Option<f64>,
    /// Multiplies the verifier timeout (not allowed on leaderboards).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FACTOR", value_parser = parse_multiplier))]
    pub verifier_timeout_multiplier: Option<f64>,
    /// Multiplies the agent setup timeout (not allowed on leaderboards).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FACTOR", value_parser = parse_multiplier))]
    pub agent_setup_timeout_multiplier: Option<f64>,
    /// Multiplies the environment build timeout (not allowed on leaderboards).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FACTOR", value_parser = parse_multiplier))]
    pub environment_build_timeout_multiplier: Option<f64>,
}

impl Default for Multipliers {
    fn default() -> Self {
        Self {
            timeout_multiplier: 1.0,
            agent_timeout_multiplier: None,
            verifier_timeout_multiplier: None,
            agent_setup_timeout_multiplier: None,
            environment_build_timeout_multiplier: None,
        }
    }
}

/// The [`MultiplierField`] of a phase multiplier: unset until given.
macro_rules! phase_field {
    ($field:ident) => {
        MultiplierField {
            name: stringify!($field),
            get: |m| m.$field,
            set: |m, v| m.$field = Some(v),
        }
    };
}

/// The phases a multiplier can scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedPhase {
    /// Image build and environment start.
    EnvironmentBuild,
    /// Agent install.
    AgentSetup,
    /// Agent run.
    Agent,
    /// Verification.
    Verifier,
}

impl Multipliers {
    /// The factor that applies to `phase`: its own multiplier when set, else the global one.
    pub fn factor(&self, phase: TimedPhase) -> f64 {
        let own = match phase {
            TimedPhase::EnvironmentBuild => self.environment_build_timeout_multiplier,
            TimedPhase::AgentSetup => self.agent_setup_timeout_multiplier,
            TimedPhase::Agent => self.agent_timeout_multiplier,
            TimedPhase::Verifier => self.verifier_timeout_multiplier,
        };
        own.unwrap_or(self.timeout_multiplier)
    }

    /// `base_sec` scaled for `phase`, saturating at [`Duration::MAX`] instead of panicking on a
    /// product too large to represent (validation keeps real inputs far below that).
    pub fn scale(&self, base_sec: f64, phase: TimedPhase) -> Duration {
        Duration::try_from_secs_f64(base_sec * self.factor(phase)).unwrap_or(Duration::MAX)
    }

    /// The five by Harbor's field names (each also the clap id of its `runner run` flag), in
    /// Harbor's order: for code that walks all five (config files, validation) instead of
    /// naming each.
    pub const FIELDS: [MultiplierField; 5] = [
        MultiplierField {
            name: "timeout_multiplier",
            get: |m| Some(m.timeout_multiplier),
            set: |m, v| m.timeout_multiplier = v,
        },
        phase_field!(agent_timeout_multiplier),
        phase_field!(verifier_timeout_multiplier),
        phase_field!(agent_setup_timeout_multiplier),
        phase_field!(environment_build_timeout_multiplier),
    ];

    /// True when every multiplier has its default (the leaderboard rule).
    pub fn is_default(&self) -> bool {
        *self == Multipliers::default()
    }
}

/// One field of [`Multipliers`], named as Harbor names it (see [`Multipliers::FIELDS`]).
#[derive(Debug, Clone, Copy)]
pub struct MultiplierField {
    /// Harbor's field name, which is also the flag's clap id (`agent_timeout_multiplier`).
    pub name: &'static str,
    /// The value; `None` for an unset phase multiplier (the global one is always set).
    pub get: fn(&Multipliers) -> Option<f64>,
    /// Sets the value.
    pub set: fn(&mut Multipliers, f64),
}

/// Parses a multiplier flag: a finite number in (0, [`MAX_MULTIPLIER`]].
pub fn parse_multiplier(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if value.is_finite() && value > 0.0 && value <= MAX_MULTIPLIER {
        Ok(value)
    } else {
        Err(format!(
            "{text} must be a number greater than 0 and at most {MAX_MULTIPLIER}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_multiplier_replaces_the_global_one_for_its_phase_only() {
        let m = Multipliers {
            timeout_multiplier: 2.0,
            agent_timeout_multiplier: Some(0.5),
            ..Multipliers::default()
        };
        assert_eq!(m.scale(100.0, TimedPhase::Agent), Duration::from_secs(50));
        assert_eq!(
            m.scale(50.0, TimedPhase::Verifier),
            Duration::from_secs(100)
        );
        assert!(!m.is_default());
        assert!(Multipliers::default().is_default());
    }

    #[test]
    fn the_field_table_names_and_reaches_each_recorded_field() {
        let mut m = Multipliers::default();
        for (i, field) in Multipliers::FIELDS.iter().enumerate() {
            (field.set)(&mut m, i as f64 + 2.0);
        }
        let recorded = serde_json::to_value(m).unwrap();
        let recorded = recorded.as_object().unwrap();
        assert_eq!(recorded.len(), Multipliers::FIELDS.len());
        for (i, field) in Multipliers::FIELDS.iter().enumerate() {
            assert_eq!(recorded[field.name], i as f64 + 2.0, "{}", field.name);
            assert_eq!((field.get)(&m), Some(i as f64 + 2.0), "{}", field.name);
        }
    }

    #[test]
    fn huge_products_saturate_instead_of_panicking() {
        let m = Multipliers {
            timeout_multiplier: 1e300,
            ..Multipliers::default()
        };
        assert_eq!(m.scale(1e20, TimedPhase::Agent), Duration::MAX);
    }

    #[test]
    fn flags_outside_the_range_are_refused() {
        assert_eq!(parse_multiplier("2.5"), Ok(2.5));
        for bad in ["0", "-1", "inf", "NaN", "1e300", "x"] {
            assert!(parse_multiplier(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serializes_under_harbor_names() {
        let json = serde_json::to_value(Multipliers::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "timeout_multiplier": 1.0,
                "agent_timeout_multiplier": null,
                "verifier_timeout_multiplier": null,
                "agent_setup_timeout_multiplier": null,
                "environment_build_timeout_multiplier": null,
            })
        );
    }
}
