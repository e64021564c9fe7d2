//! Where the next trial goes: pure arithmetic over each engine's capacity and load, so it is
//! unit-tested without engines and costs next to nothing per placement (bench: 10,000
//! placements over 10 engines).

use crate::backend::EngineCapacity;

/// What one trial asks of an engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// CPUs (`[environment] cpus`; 1 when the task does not say).
    pub cpus: f64,
    /// Memory in MB (the trial's memory limit).
    pub memory_mb: u64,
}

/// What runs on one engine now: the sum of its trials' demands.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    /// Trials (environments) running.
    pub trials: usize,
    /// Their CPUs.
    pub cpus: f64,
    /// Their memory in MB.
    pub memory_mb: u64,
}

impl Load {
    /// The load with one more trial of `demand`.
    pub fn plus(self, demand: Demand) -> Load {
        Load {
            trials: self.trials + 1,
            cpus: self.cpus + demand.cpus,
            memory_mb: self.memory_mb + demand.memory_mb,
        }
    }

    /// The load with one trial of `demand` fewer.
    pub fn minus(self, demand: Demand) -> Load {
        Load {
            trials: self.trials.saturating_sub(1),
            cpus: (self.cpus - demand.cpus).max(0.0),
            memory_mb: self.memory_mb.saturating_sub(demand.memory_mb),
        }
    }
}

/// One engine as placement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// Answering (not drained).
    pub healthy: bool,
    /// What its host has.
    pub capacity: EngineCapacity,
    /// The user's cap on its trials at once (`URL#n=8`).
    pub max_trials: Option<usize>,
    /// What runs on it.
    pub load: Load,
}

impl Slot {
    /// How full the engine would be with one more trial of `demand`: the largest share of
    /// any bounded resource (CPUs, memory, the trial cap). Above 1 is overcommitted.
    pub fn fullness_with(&self, demand: Demand) -> f64 {
        let after = self.load.plus(demand);
        let share = |used: f64, total: Option<f64>| match total {
            Some(total) if total > 0.0 => used / total,
            _ => 0.0,
        };
        [
            share(after.cpus, self.capacity.cpus),
            share(
                after.memory_mb as f64,
                self.capacity.memory_mb.map(|m| m as f64),
            ),
            share(after.trials as f64, self.max_trials.map(|n| n as f64)),
        ]
        .into_iter()
        .fold(0.0, f64::max)
    }
}

/// The engine with the most room for `demand` among the healthy ones (ties: fewer trials
/// running, then the earlier engine); `None` when none is healthy. An engine is chosen even
/// when every one is full: a trial waits for nothing but its own start (the job's
/// `--n-concurrent` bounds the total), so a pool that lost an engine overcommits the rest
/// rather than holding trials back.
pub fn choose(slots: &[Slot], demand: Demand) -> Option<usize> {
    slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.healthy)
        .min_by(|(i, a), (j, b)| {
            a.fullness_with(demand)
                .total_cmp(&b.fullness_with(demand))
                .then(a.load.trials.cmp(&b.load.trials))
                .then(i.cmp(j))
        })
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(cpus: f64, memory_mb: u64, max_trials: Option<usize>) -> Slot {
        Slot {
            healthy: true,
            capacity: EngineCapacity {
                cpus: Some(cpus),
                memory_mb: Some(memory_mb),
            },
            max_trials,
            load: Load::default(),
        }
    }

    const ONE: Demand = Demand {
        cpus: 1.0,
        memory_mb: 2048,
    };

    #[test]
    fn trials_go_where_there_is_most_room_in_proportion_to_the_engine() {
        // A big engine (16 CPUs) and a small one (4): the big one takes four trials for each
        // of the small one's, as their CPUs stand.
        let mut slots = vec![slot(16.0, 65_536, None), slot(4.0, 65_536, None)];
        let mut placed = [0usize; 2];
        for _ in 0..20 {
            let i = choose(&slots, ONE).unwrap();
            slots[i].load = slots[i].load.plus(ONE);
            placed[i] += 1;
        }
        assert_eq!(placed, [16, 4]);
        // Memory binds too: 8 GB takes four 2 GB trials whatever its CPUs.
        let mut load = slot(64.0, 8_192, None);
        for _ in 0..4 {
            load.load = load.load.plus(ONE);
        }
        assert!(load.fullness_with(ONE) > 1.0);
    }

    #[test]
    fn the_users_cap_binds_and_drained_engines_take_nothing() {
        // A big engine capped at two trials beside a 2-CPU one: half full each with one.
        let mut slots = vec![slot(64.0, 1 << 20, Some(2)), slot(2.0, 4096, None)];
        assert_eq!(
            choose(&slots, ONE),
            Some(0),
            "a tie goes to the earlier engine"
        );
        slots[0].load = slots[0].load.plus(ONE);
        assert_eq!(choose(&slots, ONE), Some(1), "engine 0 would be at its cap");
        slots[1].healthy = false;
        slots[0].load = slots[0].load.plus(ONE);
        assert_eq!(
            choose(&slots, ONE),
            Some(0),
            "overcommitted, never held back"
        );
        slots[0].healthy = false;
        assert_eq!(choose(&slots, ONE), None);
    }

    #[test]
    fn an_engine_that_reports_nothing_is_filled_by_count_and_loads_come_back_down() {
        let unknown = Slot {
            healthy: true,
            capacity: EngineCapacity::default(),
            max_trials: None,
            load: Load::default(),
        };
        let mut slots = vec![unknown, unknown];
        let first = choose(&slots, ONE).unwrap();
        slots[first].load = slots[first].load.plus(ONE);
        assert_ne!(choose(&slots, ONE), Some(first), "the idle one next");
        slots[first].load = slots[first].load.minus(ONE);
        assert_eq!(slots[first].load, Load::default());
    }
}
