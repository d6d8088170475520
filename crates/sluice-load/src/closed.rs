//! The closed model on one worker: a fixed number of virtual users, each sending one request,
//! waiting for the whole response, and sending again until the run's duration or request count is
//! used up. Latency runs from the moment a user begins a request (including connecting when it
//! must) to the last byte; a user may pause (`think`) between a response and its next request,
//! as k6 scripts do with `sleep`. Requests in flight when the duration ends finish (bounded by the
//! request timeout) and are counted. The worker split and the merge are `run`'s.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use tokio::time::Instant;

use crate::client::Connection;
use crate::target::WeightedPicker;
use crate::worker::WorkerCtx;

/// This worker's share of a closed run.
pub(crate) struct ClosedShare {
    pub vus: usize,
    /// When users stop beginning requests.
    pub end: Option<Instant>,
    /// Requests this worker may still begin.
    pub quota: Option<u64>,
    /// Pause after each response.
    pub think: std::time::Duration,
}

pub(crate) async fn run_closed(ctx: Rc<WorkerCtx>, share: ClosedShare) {
    let quota = Rc::new(Cell::new(share.quota));
    let picker = Rc::new(RefCell::new(WeightedPicker::new(ctx.targets.iter().map(|t| t.weight))));
    let mut users = Vec::with_capacity(share.vus);
    for i in 0..share.vus {
        // With think time, users start spread over one pause, as independent users arrive;
        // started together they would stay one synchronized burst every round, and each
        // burst's queueing would read as the server's latency.
        let delay = share.think.mul_f64(i as f64 / share.vus.max(1) as f64);
        users.push(tokio::task::spawn_local(virtual_user(
            ctx.clone(),
            quota.clone(),
            picker.clone(),
            share.end,
            share.think,
            delay,
        )));
    }
    for u in users {
        // A user task only ends by returning; a panic there is a bug, and its totals are lost.
        let _ = u.await;
    }
}

async fn virtual_user(
    ctx: Rc<WorkerCtx>,
    quota: Rc<Cell<Option<u64>>>,
    picker: Rc<RefCell<WeightedPicker>>,
    end: Option<Instant>,
    think: std::time::Duration,
    delay: std::time::Duration,
) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut conn = Connection::new(ctx.connections, ctx.expected);
    ctx.recorder.borrow_mut().user_arrived(Instant::now());
    loop {
        let origin = Instant::now();
        if end.is_some_and(|e| origin >= e) || ctx.stopped() {
            break;
        }
        match quota.get() {
            Some(0) => break,
            Some(n) => quota.set(Some(n - 1)),
            None => {}
        }
        let target = picker.borrow_mut().next_index();
        {
            let mut rec = ctx.recorder.borrow_mut();
            rec.arrival(origin);
            rec.sent(origin);
        }
        let mut record = conn.request(&ctx.targets[target], origin, origin + ctx.timeout).await;
        record.target = target;
        ctx.recorder.borrow_mut().finish(Instant::now(), &record);
        if !think.is_zero() {
            // Think time is the user's, not the request's: latency is already recorded, and a
            // user whose pause runs past the end begins nothing more.
            tokio::time::sleep(think).await;
        }
    }
    conn.close();
    ctx.recorder.borrow_mut().user_left(Instant::now());
}
