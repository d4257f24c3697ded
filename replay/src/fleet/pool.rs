//! Running independent items (recordings) over lanes: a lane is a host job
//! slot or a device, with its own state (its store connection, its device
//! ordinal). Each lane runs one item at a time on its own thread and takes
//! the next unstarted item when done, so a slow item holds up only its
//! lane. Results reach the caller in item order, each as soon as every
//! item before it is done, so the output of N lanes reads like that of
//! one. One lane runs on the calling thread (no thread is started: a
//! single-threaded process may fork its host runners, see
//! `backend::host::process`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Run `work(lane, i)` for every `i` in `0..n` over `lanes`; `done(i, r)`
/// sees each result on the calling thread, in order of `i`. A failed item
/// (its `R` says so) does not stop the others. Returns the lanes.
pub fn run_ordered<L, R, W>(
    mut lanes: Vec<L>,
    n: usize,
    work: W,
    done: &mut dyn FnMut(usize, R),
) -> Vec<L>
where
    L: Send,
    R: Send,
    W: Fn(&mut L, usize) -> R + Sync,
{
    if lanes.len() <= 1 {
        if let Some(lane) = lanes.first_mut() {
            for i in 0..n {
                let r = work(lane, i);
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
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = work(&mut lane, i);
                    if tx.send((i, r)).is_err() {
                        break;
                    }
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
    fn zero_items_and_no_lanes_do_nothing() {
        let mut calls = 0;
        run_ordered(vec![(); 3], 0, |_, _| (), &mut |_, _| calls += 1);
        run_ordered(Vec::<()>::new(), 5, |_, _| (), &mut |_, _| calls += 1);
        assert_eq!(calls, 0);
    }
}
