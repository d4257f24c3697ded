//! Running independent items (recordings) over lanes: a lane is a host job
//! slot or a device, with its own state (its store connection, its device
//! ordinal). Each lane runs one item at a time on its own thread and takes
//! the next unstarted item when done, so a slow item holds up only its
//! lane. Results reach the caller in item order, each as soon as every
//! item before it is done, so the output of N lanes reads like that of
//! one. One lane runs on the calling thread (no thread is started: a
//! single-threaded process may fork its host runners, see
//! `backend::host::process`).
//!
//! [`run_ordered_ahead`] also tells each item which item its lane runs
//! next (a lane claims its next item when it starts one), so that the
//! lane can prepare it meanwhile ([`super::lookahead`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Run `work(lane, i)` for every `i` in `0..n` over `lanes`; `done(i, r)`
/// sees each result on the calling thread, in order of `i`. A failed item
/// (its `R` says so) does not stop the others. Returns the lanes.
pub fn run_ordered<L, R, W>(
    lanes: Vec<L>,
    n: usize,
    work: W,
    done: &mut dyn FnMut(usize, R),
) -> Vec<L>
where
    L: Send,
    R: Send,
    W: Fn(&mut L, usize) -> R + Sync,
{
    run_lanes(lanes, n, false, &|l: &mut L, i, _| work(l, i), done)
}

/// [`run_ordered`], with `work(lane, i, next)` told the item the lane runs
/// after `i` (`None`: `i` is its last). Each lane holds one item ahead, so
/// items are spread a little less evenly over the lanes than by
/// [`run_ordered`]; with `ahead` false no lane holds one (`next` is always
/// `None`), which is [`run_ordered`]'s spread: lanes that prepare nothing
/// should not pay for it.
pub fn run_ordered_ahead<L, R, W>(
    lanes: Vec<L>,
    n: usize,
    ahead: bool,
    work: W,
    done: &mut dyn FnMut(usize, R),
) -> Vec<L>
where
    L: Send,
    R: Send,
    W: Fn(&mut L, usize, Option<usize>) -> R + Sync,
{
    run_lanes(lanes, n, ahead, &work, done)
}

type Work<'w, L, R> = dyn Fn(&mut L, usize, Option<usize>) -> R + Sync + 'w;

fn run_lanes<L: Send, R: Send>(
    mut lanes: Vec<L>,
    n: usize,
    ahead: bool,
    work: &Work<'_, L, R>,
    done: &mut dyn FnMut(usize, R),
) -> Vec<L> {
    if lanes.len() <= 1 {
        if let Some(lane) = lanes.first_mut() {
            for i in 0..n {
                let next = (ahead && i + 1 < n).then_some(i + 1);
                let r = work(lane, i, next);
                done(i, r);
            }
        }
        return lanes;
    }
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, R)>();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for mut lane in lanes.drain(..) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            handles.push(s.spawn(move || {
                let claim = || Some(next.fetch_add(1, Ordering::Relaxed)).filter(|&i| i < n);
                let mut cur = claim();
                while let Some(i) = cur {
                    let after = if ahead { claim() } else { None };
                    let r = work(&mut lane, i, after);
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                    cur = if ahead { after } else { claim() };
                }
                lane
            }));
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut due = 0;
        for (i, r) in rx {
            waiting.insert(i, r);
            while let Some(r) = waiting.remove(&due) {
                done(due, r);
                due += 1;
            }
        }
        for h in handles {
            match h.join() {
                Ok(l) => lanes.push(l),
                // A panic is a bug: pass it on as the sequential run would.
                Err(p) => std::panic::resume_unwind(p),
            }
        }
    });
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_item_runs_once_and_results_come_in_order() {
        for lanes in 1..=4usize {
            let ran = Mutex::new(Vec::new());
            let mut got = Vec::new();
            let l: Vec<usize> = (0..lanes).collect();
            let back = run_ordered(
                l,
                23,
                |lane: &mut usize, i| {
                    // Uneven items: the first ones are the slowest.
                    std::thread::sleep(std::time::Duration::from_millis(((23 - i) % 5) as u64));
                    ran.lock().unwrap().push((i, *lane));
                    i * 10
                },
                &mut |i, r| got.push((i, r)),
            );
            assert_eq!(got, (0..23).map(|i| (i, i * 10)).collect::<Vec<_>>());
            let mut items: Vec<usize> = ran.lock().unwrap().iter().map(|p| p.0).collect();
            items.sort();
            assert_eq!(items, (0..23).collect::<Vec<_>>());
            let mut back = back;
            back.sort();
            assert_eq!(
                back,
                (0..lanes).collect::<Vec<_>>(),
                "every lane is handed back"
            );
        }
    }

    #[test]
    fn a_lane_runs_one_item_at_a_time_and_failures_do_not_stop_the_others() {
        // Fake devices: each lane counts the items it is running at once.
        let busy: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let mut results = Vec::new();
        run_ordered(
            vec![0usize, 1, 2],
            12,
            |dev: &mut usize, i| {
                let now = busy[*dev].fetch_add(1, Ordering::SeqCst);
                assert_eq!(now, 0, "device {dev} ran two items at once");
                std::thread::sleep(std::time::Duration::from_millis(2));
                busy[*dev].fetch_sub(1, Ordering::SeqCst);
                if i % 4 == 1 {
                    Err(format!("item {i} failed"))
                } else {
                    Ok(i)
                }
            },
            &mut |_, r| results.push(r),
        );
        assert_eq!(results.len(), 12);
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 3);
        assert_eq!(results[11], Ok(11));
    }

    #[test]
    fn a_lane_is_told_its_next_item_and_runs_it_next() {
        for lanes in 1..=3usize {
            // Per lane, the items it ran and the next each was told of.
            type Ran = Mutex<Vec<(usize, Option<usize>)>>;
            let ran: Vec<Ran> = (0..lanes).map(|_| Mutex::new(Vec::new())).collect();
            let mut got = Vec::new();
            run_ordered_ahead(
                (0..lanes).collect(),
                17,
                true,
                |lane: &mut usize, i, next| {
                    std::thread::sleep(std::time::Duration::from_millis((i % 3) as u64));
                    ran[*lane].lock().unwrap().push((i, next));
                    i
                },
                &mut |i, r| got.push((i, r)),
            );
            assert_eq!(got, (0..17).map(|i| (i, i)).collect::<Vec<_>>());
            let mut all = Vec::new();
            for lane in &ran {
                let lane = lane.lock().unwrap();
                for w in lane.windows(2) {
                    assert_eq!(w[0].1, Some(w[1].0), "the lane ran another item next");
                }
                assert_eq!(
                    lane.last().and_then(|l| l.1),
                    None,
                    "told of an item it never ran"
                );
                all.extend(lane.iter().map(|p| p.0));
            }
            all.sort();
            assert_eq!(all, (0..17).collect::<Vec<_>>(), "every item once");
        }
    }

    #[test]
    fn zero_items_and_no_lanes_do_nothing() {
        let mut calls = 0;
        run_ordered(vec![(); 3], 0, |_, _| (), &mut |_, _| calls += 1);
        run_ordered(Vec::<()>::new(), 5, |_, _| (), &mut |_, _| calls += 1);
        assert_eq!(calls, 0);
    }
}
