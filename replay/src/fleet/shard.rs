//! `--shard I/N`: the recordings whose ID, read as a number, leaves the
//! remainder I when divided by N (the ID's first 8 bytes, big-endian, mod
//! N). IDs are BLAKE3 hashes, so the shards are about equal, and any N
//! shards are disjoint and together cover every recording, whatever each
//! job's store holds beyond them. I counts from 0.
//!
//! `--shard auto` takes I and N from a batch scheduler's environment:
//! * Slurm job arrays: `SLURM_ARRAY_TASK_ID`, and `SLURM_ARRAY_TASK_COUNT`
//!   or `SLURM_ARRAY_TASK_MIN`/`MAX` (with `SLURM_ARRAY_TASK_STEP`), so
//!   `--array=1-8` and `--array=0-15:2` both give I from 0;
//! * Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX`, which has no count:
//!   `--shard auto/N` gives it, or `--shard auto/VAR` names the variable
//!   holding it (set from the manifest's `completions`).

use rrstore_format::RecordingId;
use serde::Serialize;

use super::FleetError;

/// One shard of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// From 0.
    pub index: u32,
    pub count: u32,
}

/// `--shard` as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardSpec {
    Fixed(Shard),
    /// From the environment; the count from `auto/N` or `auto/VAR`.
    Auto(Option<Count>),
}

/// Where `auto/...` takes the shard count from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    Number(u32),
    Var(String),
}

impl Shard {
    /// Whether recording `id` is in this shard.
    pub fn contains(&self, id: &RecordingId) -> bool {
        let mut head = [0u8; 8];
        head.copy_from_slice(&id.0[..8]);
        u64::from_be_bytes(head) % u64::from(self.count) == u64::from(self.index)
    }

    fn new(index: u64, count: u64, spec: &str) -> Result<Shard, FleetError> {
        let (Ok(index), Ok(count)) = (u32::try_from(index), u32::try_from(count)) else {
            return Err(bad(spec, "the shard numbers are too large"));
        };
        if count == 0 {
            return Err(bad(spec, "the shard count must be at least 1"));
        }
        if index >= count {
            return Err(bad(
                spec,
                &format!(
                    "shard {index} of {count} does not exist (shards count from 0 to {})",
                    count - 1
                ),
            ));
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Read `I/N`, `auto`, `auto/N` or `auto/VAR`.
pub fn parse(spec: &str) -> Result<ShardSpec, FleetError> {
    let s = spec.trim();
    if s == "auto" {
        return Ok(ShardSpec::Auto(None));
    }
    let Some((a, b)) = s.split_once('/') else {
        return Err(bad(
            spec,
            "expected I/N (I from 0), auto, auto/N or auto/VAR",
        ));
    };
    if a == "auto" {
        if let Ok(n) = b.parse::<u32>() {
            return Ok(ShardSpec::Auto(Some(Count::Number(n))));
        }
        let var = !b.is_empty()
            && b.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
            && !b.as_bytes()[0].is_ascii_digit();
        if !var {
            return Err(bad(spec, "after auto/ give the shard count or the name of the environment variable holding it"));
        }
        return Ok(ShardSpec::Auto(Some(Count::Var(b.to_string()))));
    }
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(i), Ok(n)) => Shard::new(i, n, spec).map(ShardSpec::Fixed),
        _ => Err(bad(spec, "expected I/N with whole numbers, e.g. 0/4")),
    }
}

impl ShardSpec {
    /// The shard, reading the scheduler's variables through `env`.
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, FleetError> {
        let count = match self {
            ShardSpec::Fixed(s) => return Ok(*s),
            ShardSpec::Auto(c) => c,
        };
        let spec = "auto";
        let given = match count {
            None => None,
            Some(Count::Number(n)) => Some(u64::from(*n)),
            Some(Count::Var(v)) => Some(number(env, v, spec)?.ok_or_else(|| {
                bad(
                    spec,
                    &format!("the environment variable {v} (the shard count) is not set"),
                )
            })?),
        };
        if let Some(id) = number(env, "SLURM_ARRAY_TASK_ID", spec)? {
            let min = number(env, "SLURM_ARRAY_TASK_MIN", spec)?.unwrap_or(0);
            let step = number(env, "SLURM_ARRAY_TASK_STEP", spec)?
                .unwrap_or(1)
                .max(1);
            if id < min || (id - min) % step != 0 {
                return Err(bad(spec, &format!(
                    "SLURM_ARRAY_TASK_ID {id} is not in the array from SLURM_ARRAY_TASK_MIN {min} by {step}"
                )));
            }
            let count = match (given, number(env, "SLURM_ARRAY_TASK_COUNT", spec)?) {
                (Some(n), _) | (None, Some(n)) => n,
                (None, None) => match number(env, "SLURM_ARRAY_TASK_MAX", spec)? {
                    Some(max) if max >= min => (max - min) / step + 1,
                    _ => return Err(bad(spec, "Slurm sets SLURM_ARRAY_TASK_ID but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX: give the count as auto/N")),
                },
            };
            return Shard::new((id - min) / step, count, spec);
        }
        if let Some(index) = number(env, "JOB_COMPLETION_INDEX", spec)? {
            let Some(count) = given else {
                return Err(bad(spec, "a Kubernetes Indexed Job sets JOB_COMPLETION_INDEX but not the completion count: give it as auto/N or name the variable holding it, auto/VAR"));
            };
            return Shard::new(index, count, spec);
        }
        Err(bad(spec, "neither a Slurm job array (SLURM_ARRAY_TASK_ID) nor a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) is in the environment; give the shard as I/N"))
    }
}

/// The whole-number value of variable `name`, if set.
fn number(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    spec: &str,
) -> Result<Option<u64>, FleetError> {
    match env(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            bad(
                spec,
                &format!("the environment variable {name} is `{v}`, not a whole number"),
            )
        }),
    }
}

fn bad(spec: &str, why: &str) -> FleetError {
    FleetError::BadShard {
        spec: spec.to_string(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn ids(n: usize) -> Vec<RecordingId> {
        (0..n)
            .map(|i| RecordingId(*blake3::hash(&i.to_le_bytes()).as_bytes()))
            .collect()
    }

    #[test]
    fn shards_one_to_five_are_disjoint_and_cover_every_id() {
        let all = ids(200);
        for n in 1..=5u32 {
            let mut seen = vec![0; all.len()];
            for i in 0..n {
                let s = Shard { index: i, count: n };
                for (k, id) in all.iter().enumerate() {
                    seen[k] += usize::from(s.contains(id));
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "N={n}: {seen:?}");
        }
    }

    #[test]
    fn fixed_specs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse("2/5").unwrap(),
            ShardSpec::Fixed(Shard { index: 2, count: 5 })
        );
        for s in ["5/5", "0/0", "1", "a/b", "-1/3", "auto/", "auto/9x"] {
            assert!(parse(s).is_err(), "{s}");
        }
        assert!(parse("3/3")
            .unwrap_err()
            .to_string()
            .contains("from 0 to 2"));
    }

    #[test]
    fn slurm_arrays_give_index_from_zero() {
        let auto = parse("auto").unwrap();
        let s = auto
            .resolve(&env(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ]))
            .unwrap();
        assert_eq!(s, Shard { index: 3, count: 4 });
        // --array=1-8
        let s = auto
            .resolve(&env(&[
                ("SLURM_ARRAY_TASK_ID", "1"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "8"),
            ]))
            .unwrap();
        assert_eq!(s, Shard { index: 0, count: 8 });
        // --array=0-15:4 -> 0, 4, 8, 12
        let s = auto
            .resolve(&env(&[
                ("SLURM_ARRAY_TASK_ID", "8"),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_MAX", "15"),
                ("SLURM_ARRAY_TASK_STEP", "4"),
            ]))
            .unwrap();
        assert_eq!(s, Shard { index: 2, count: 4 });
        let e = auto
            .resolve(&env(&[("SLURM_ARRAY_TASK_ID", "2")]))
            .unwrap_err();
        assert!(e.to_string().contains("auto/N"), "{e}");
    }

    #[test]
    fn kubernetes_indexed_jobs_need_the_count() {
        let vars = [("JOB_COMPLETION_INDEX", "2"), ("SHARDS", "3")];
        let e = parse("auto").unwrap().resolve(&env(&vars)).unwrap_err();
        assert!(e.to_string().contains("JOB_COMPLETION_INDEX"), "{e}");
        let s = parse("auto/5").unwrap().resolve(&env(&vars)).unwrap();
        assert_eq!(s, Shard { index: 2, count: 5 });
        let s = parse("auto/SHARDS").unwrap().resolve(&env(&vars)).unwrap();
        assert_eq!(s, Shard { index: 2, count: 3 });
        let e = parse("auto/NOPE")
            .unwrap()
            .resolve(&env(&vars))
            .unwrap_err();
        assert!(e.to_string().contains("NOPE"), "{e}");
        let e = parse("auto/2").unwrap().resolve(&env(&vars)).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    #[test]
    fn no_scheduler_is_a_clear_error() {
        let e = parse("auto")
            .unwrap()
            .resolve(&env(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SLURM_ARRAY_TASK_ID") && e.contains("I/N"),
            "{e}"
        );
        let e = parse("auto")
            .unwrap()
            .resolve(&env(&[("SLURM_ARRAY_TASK_ID", "x")]))
            .unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{e}");
    }
}
