//! The compact JSON of the Model's parts that stay the same from one report to the next (the
//! programs' status and the panes' state: ~11 of a quiet report's ~22 KB, a third of its
//! serialising time at `--interval 0.1`), serialised once and written again as it is while the
//! same `Arc` (or an equal value) comes back. Only inside [`compact`], which the JSON-lines
//! writer uses: elsewhere (pretty JSON, tests' `to_value`) the fields serialise as usual, so the
//! output is the same bytes either way.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static PROGRAMS: Memo<crate::sample::BpfProgramStatus> = const { RefCell::new(None) };
    static PANES: Memo<super::panes::PaneStatus> = const { RefCell::new(None) };
    static MAPS: Memo<crate::sample::BpfMapMemory> = const { RefCell::new(None) };
}

type Memo<T> = RefCell<Option<(Arc<Vec<T>>, Box<RawValue>)>>;

/// Runs `f` (a compact `serde_json` serialisation of a Model) with the memo on.
pub fn compact<R>(f: impl FnOnce() -> R) -> R {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ON.set(false);
        }
    }
    ON.set(true);
    let _off = Off;
    f()
}

fn memoised<T, S>(
    memo: &'static std::thread::LocalKey<Memo<T>>,
    v: &Arc<Vec<T>>,
    s: S,
) -> Result<S::Ok, S::Error>
where
    T: Serialize + PartialEq,
    S: Serializer,
{
    if !ON.get() {
        return v.serialize(s);
    }
    memo.with_borrow_mut(|memo| {
        let hit = memo.as_ref().is_some_and(|(last, _)| Arc::ptr_eq(last, v) || last == v);
        if !hit {
            let json = serde_json::to_string(&**v).map_err(S::Error::custom)?;
            *memo = Some((v.clone(), RawValue::from_string(json).map_err(S::Error::custom)?));
        }
        match memo {
            Some((_, json)) => json.serialize(s),
            None => v.serialize(s),
        }
    })
}

pub fn programs<S: Serializer>(
    v: &Arc<Vec<crate::sample::BpfProgramStatus>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    memoised(&PROGRAMS, v, s)
}

pub fn panes<S: Serializer>(v: &Arc<Vec<super::panes::PaneStatus>>, s: S) -> Result<S::Ok, S::Error> {
    memoised(&PANES, v, s)
}

pub fn maps<S: Serializer>(v: &Arc<Vec<crate::sample::BpfMapMemory>>, s: S) -> Result<S::Ok, S::Error> {
    memoised(&MAPS, v, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::BpfProgramStatus;

    fn model(programs: &Arc<Vec<BpfProgramStatus>>) -> super::super::Model {
        let mut m = super::super::Model::default();
        m.bpf.programs = programs.clone();
        m
    }

    /// The memoised report is byte for byte the plain one, and follows a changed value.
    #[test]
    fn memoised_json_is_the_plain_json() {
        let one = |name: &str, run_cnt| BpfProgramStatus {
            program: name.into(),
            tracepoint: "block:block_io_start".into(),
            attached: true,
            run_cnt,
            ..Default::default()
        };
        let a = Arc::new(vec![one("a", 1), one("b\"quoted\"", 2)]);
        let plain = serde_json::to_string(&model(&a)).unwrap();
        let memo = || compact(|| serde_json::to_string(&model(&a)).unwrap());
        assert_eq!(memo(), plain);
        assert_eq!(memo(), plain, "from the memo");
        // Another Arc, equal: the memo; different: serialised again.
        let b = Arc::new((*a).clone());
        assert_eq!(compact(|| serde_json::to_string(&model(&b)).unwrap()), plain);
        let c = Arc::new(vec![one("a", 5)]);
        let changed = compact(|| serde_json::to_string(&model(&c)).unwrap());
        assert_eq!(changed, serde_json::to_string(&model(&c)).unwrap());
        assert!(changed.contains("\"run_cnt\":5"), "{changed}");
    }
}
