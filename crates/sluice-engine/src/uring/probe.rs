//! Whether this process may use io_uring, found out by asking the kernel, and the fallback to epoll.
//!
//! Owns the start-up probe: the `SLUICE_FORCE_EPOLL` override, the `kernel.io_uring_disabled`
//! sysctl, creating a ring (which is where seccomp, old kernels and `RLIMIT_MEMLOCK` say no), the
//! opcode table (`IORING_REGISTER_PROBE`), the setup flags the kernel accepts
//! (`SINGLE_ISSUER`+`DEFER_TASKRUN`, else `COOP_TASKRUN`), the optional batching wait
//! (`IORING_FEAT_MIN_TIMEOUT`), and a live test of the two features the engine cannot do without
//! and that no opcode table reports: multishot accept and multishot receive into a provided-buffer
//! ring. Nothing is inferred from the kernel version. The result is
//! computed once per process. It also owns [`resolve_engine`], the rule for what to run when
//! io_uring is refused. It does not run connections (that is the worker loop in `uring/mod.rs`).

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::Duration;

use io_uring::{cqueue, opcode, types, IoUring, Probe};

use crate::config::EngineKind;
use crate::error::EngineError;

/// The environment variable that makes the probe report io_uring as refused, so tests can
/// exercise the fallback on kernels that have io_uring.
pub const FORCE_EPOLL_ENV: &str = "SLUICE_FORCE_EPOLL";

/// How a ring is set up, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskRun {
    /// `SINGLE_ISSUER | DEFER_TASKRUN` (6.1+): completions are posted only when the worker
    /// enters the ring to wait, so the kernel never interrupts the loop to run task work.
    Deferred,
    /// `COOP_TASKRUN | TASKRUN_FLAG` (5.19+): no inter-processor interrupt per completion.
    Cooperative,
    /// Neither flag is accepted.
    Plain,
}

/// What the kernel offers, as found by [`support`].
#[derive(Debug, Clone)]
pub(crate) struct Support {
    /// The best setup flags the kernel accepted.
    pub taskrun: TaskRun,
    /// `IORING_SETUP_SUBMIT_ALL` (5.18+): a failing SQE does not stop the rest of the batch.
    pub submit_all: bool,
    /// `IORING_REGISTER_IOWQ_MAX_WORKERS` (5.15+) works.
    pub iowq_max_workers: bool,
    /// `IORING_FEAT_MIN_TIMEOUT` (6.12+): `io_uring_enter` takes `min_wait_usec`, so a worker can
    /// wait for a batch of completions but return with fewer once that much time has passed.
    /// Without it the worker waits for one completion per turn.
    pub min_wait: bool,
}

/// The kernel's answer, asked once per process.
static SUPPORT: OnceLock<Result<Support, String>> = OnceLock::new();

/// Whether this process can run the io_uring engine; the error says why not, in words a user can
/// act on.
pub(crate) fn support() -> Result<&'static Support, String> {
    SUPPORT.get_or_init(probe).as_ref().map_err(Clone::clone)
}

/// Decides which engine to run when `requested` is asked for.
///
/// Engines other than `uring` are returned unchanged without probing. For `uring` the kernel is
/// probed (once per process): when it offers everything the engine needs, the answer is
/// `(Uring, None)`. When it refuses, and the user `demanded` io_uring (`--engine uring` on the
/// command line), the result is an error carrying the reason, to be reported before exiting;
/// otherwise the answer is `(Epoll, Some(reason))`, and the caller should log the reason and run
/// epoll. Setting `SLUICE_FORCE_EPOLL=1` makes the probe report a refusal.
pub fn resolve_engine(
    requested: EngineKind,
    demanded: bool,
) -> Result<(EngineKind, Option<String>), EngineError> {
    if requested != EngineKind::Uring {
        return Ok((requested, None));
    }
    match support() {
        Ok(_) => Ok((EngineKind::Uring, None)),
        Err(reason) if demanded => Err(refusal(&reason)),
        Err(reason) => Ok((EngineKind::Epoll, Some(format!("io_uring unavailable, using epoll: {reason}")))),
    }
}

/// The error the engine reports when io_uring was demanded and refused.
pub(crate) fn refusal(reason: &str) -> EngineError {
    EngineError::Setup {
        what: "io_uring unavailable",
        source: io::Error::new(io::ErrorKind::Unsupported, reason.to_string()),
    }
}

/// Builds a ring with the setup flags `taskrun` names. Workers and the probe share this, so a
/// worker never asks for a flag the probe did not see accepted.
pub(crate) fn build_ring(
    taskrun: TaskRun,
    submit_all: bool,
    sq_entries: u32,
    cq_entries: u32,
) -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    // CLAMP: a CQ size over the kernel's maximum is reduced rather than refused.
    b.setup_cqsize(cq_entries).setup_clamp();
    match taskrun {
        TaskRun::Deferred => {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        TaskRun::Cooperative => {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }
        TaskRun::Plain => {}
    }
    if submit_all {
        b.setup_submit_all();
    }
    b.build(sq_entries)
}

fn probe() -> Result<Support, String> {
    if std::env::var_os(FORCE_EPOLL_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(format!("{FORCE_EPOLL_ENV}=1 is set"));
    }
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").ok();
    let sysctl = sysctl.as_deref().map(str::trim);
    if sysctl == Some("2") {
        return Err("io_uring is disabled for every process by the sysctl kernel.io_uring_disabled=2".into());
    }
    // The plain set-up first: if even that fails, the reason is about io_uring as a whole.
    let plain = build_ring(TaskRun::Plain, false, 8, 16).map_err(|e| setup_refusal(&e, sysctl))?;
    let submit_all = build_ring(TaskRun::Plain, true, 8, 16).is_ok();
    let taskrun = if build_ring(TaskRun::Deferred, submit_all, 8, 16).is_ok() {
        TaskRun::Deferred
    } else if build_ring(TaskRun::Cooperative, submit_all, 8, 16).is_ok() {
        TaskRun::Cooperative
    } else {
        TaskRun::Plain
    };
    drop(plain);
    let mut ring = build_ring(taskrun, submit_all, 8, 16)
        .map_err(|e| format!("io_uring_setup failed with flags the kernel accepted a moment ago: {e}"))?;

    let mut opcodes = Probe::new();
    ring.submitter()
        .register_probe(&mut opcodes)
        .map_err(|e| format!("IORING_REGISTER_PROBE failed ({e}): the kernel's io_uring is too old"))?;
    let needed = [
        (opcode::AcceptMulti::CODE, "IORING_OP_ACCEPT"),
        (opcode::RecvMulti::CODE, "IORING_OP_RECV"),
        (opcode::Send::CODE, "IORING_OP_SEND"),
        (opcode::SendMsg::CODE, "IORING_OP_SENDMSG"),
        (opcode::Splice::CODE, "IORING_OP_SPLICE"),
        (opcode::Read::CODE, "IORING_OP_READ"),
        (opcode::PollAdd::CODE, "IORING_OP_POLL_ADD"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
    ];
    let missing: Vec<&str> =
        needed.iter().filter(|(code, _)| !opcodes.is_supported(*code)).map(|(_, name)| *name).collect();
    if !missing.is_empty() {
        return Err(format!("the kernel's io_uring lacks {}", missing.join(", ")));
    }
    let params = ring.params();
    if !params.is_feature_ext_arg() {
        return Err("the kernel's io_uring lacks IORING_FEAT_EXT_ARG (timed waits)".into());
    }
    if !params.is_feature_nodrop() {
        return Err("the kernel's io_uring lacks IORING_FEAT_NODROP (completions could be lost)".into());
    }
    // Zeros only read the current limits; an error means the kernel cannot cap its workers.
    let iowq_max_workers = ring.submitter().register_iowq_max_workers(&mut [0, 0]).is_ok();
    let min_wait = params.is_feature_min_timeout();
    live_test(&mut ring)?;
    Ok(Support { taskrun, submit_all, iowq_max_workers, min_wait })
}

/// Turns an `io_uring_setup` failure into the reason a user can act on.
fn setup_refusal(e: &io::Error, sysctl: Option<&str>) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => format!(
            "io_uring_setup: {e}: the kernel was built without io_uring, or a seccomp filter (a container \
             runtime's default profile, systemd's SystemCallFilter) blocks it"
        ),
        Some(libc::EPERM) if sysctl == Some("1") => format!(
            "io_uring_setup: {e}: kernel.io_uring_disabled=1 allows io_uring only to members of \
             kernel.io_uring_group (or a seccomp filter blocks it)"
        ),
        Some(libc::EPERM) => format!("io_uring_setup: {e}: a seccomp filter or security policy blocks it"),
        Some(libc::ENOMEM) => {
            let memlock = crate::sys::fd::memlock_limit();
            format!(
                "io_uring_setup: {e}: the ring does not fit in the locked-memory limit \
                 (RLIMIT_MEMLOCK {} KiB; raise `ulimit -l` or LimitMEMLOCK=)",
                memlock / 1024
            )
        }
        _ => format!("io_uring_setup: {e}"),
    }
}

/// Exercises multishot accept and multishot receive with a provided-buffer ring on loopback,
/// since the opcode table says only that ACCEPT and RECV exist, not that they take these flags.
fn live_test(ring: &mut IoUring) -> Result<(), String> {
    const ACCEPT: u64 = 1;
    const RECV: u64 = 2;
    const CANCEL: u64 = 3;
    const BGID: u16 = 0;
    // A two-entry buffer ring: 16-byte descriptors, page aligned, with one 64-byte buffer each.
    let mut bufs =
        crate::sys::buf_ring::BufRing::new(2, 64).map_err(|e| format!("provided-buffer ring: {e}"))?;
    bufs.register(ring, BGID).map_err(|e| {
        format!("the kernel cannot register a provided-buffer ring (IORING_REGISTER_PBUF_RING): {e}")
    })?;
    let result = (|| {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("probe listener: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("probe listener: {e}"))?;
        let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT);
        // The entry refers to the listener only, which outlives the ring's use of it (the ring is
        // dropped, cancelling everything, before the listener at the end of scope at the latest).
        push(ring, &accept)?;
        let mut client = TcpStream::connect(addr).map_err(|e| format!("probe connect: {e}"))?;
        let (res, flags) = wait_one(ring, ACCEPT, "multishot accept")?;
        if res < 0 {
            return Err(format!(
                "the kernel refuses multishot accept: {}",
                io::Error::from_raw_os_error(-res)
            ));
        }
        // A successful accept completion carries a fresh descriptor we now own.
        let server = crate::sys::socket::accepted_stream(res);
        if !cqueue::more(flags) {
            return Err("the kernel ended a multishot accept after one connection".into());
        }
        let recv = opcode::RecvMulti::new(types::Fd(server.as_raw_fd()), BGID).build().user_data(RECV);
        // The entry refers to `server` and the registered buffer ring, both alive until the ring
        // is dropped.
        push(ring, &recv)?;
        io::Write::write_all(&mut client, b"x").map_err(|e| format!("probe write: {e}"))?;
        let (res, flags) = wait_one(ring, RECV, "multishot receive")?;
        if res != 1 || cqueue::buffer_select(flags).is_none() {
            return Err(format!(
                "the kernel refuses multishot receive with a provided-buffer ring: {}",
                if res < 0 {
                    io::Error::from_raw_os_error(-res).to_string()
                } else {
                    format!("result {res}")
                }
            ));
        }
        if !cqueue::more(flags) {
            return Err("the kernel ended a multishot receive after one completion".into());
        }
        // Closing a connection cancels its operations by descriptor (5.19+); the armed receive
        // is the one to find.
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(server.as_raw_fd())).all())
            .build()
            .user_data(CANCEL);
        // The entry holds no pointers.
        push(ring, &cancel)?;
        let (res, _) = wait_one(ring, CANCEL, "cancel by descriptor")?;
        if res < 1 {
            return Err(format!(
                "the kernel cannot cancel operations by descriptor (IORING_ASYNC_CANCEL_FD): {}",
                if res < 0 {
                    io::Error::from_raw_os_error(-res).to_string()
                } else {
                    "nothing cancelled".into()
                }
            ));
        }
        Ok(())
    })();
    // Dropping the ring (the caller does) cancels the armed operations; the buffer ring memory
    // must outlive that, so it is leaked if the ring is still alive when we return. Unregistering
    // first makes the kernel stop using it, after which it can be freed.
    if ring.submitter().unregister_buf_ring(BGID).is_ok() {
        drop(bufs);
    } else {
        std::mem::forget(bufs);
    }
    result
}

/// Waits (one second at most) for the completion tagged `tag`, skipping others.
/// Queues one probe entry (its memory outlives the ring, see each caller).
fn push(ring: &mut IoUring, entry: &io_uring::squeue::Entry) -> Result<(), String> {
    crate::sys::uring::push(ring, entry)
        .then_some(())
        .ok_or_else(|| "probe: submission queue full".to_string())
}

fn wait_one(ring: &mut IoUring, tag: u64, what: &str) -> Result<(i32, u32), String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let ts = types::Timespec::new().nsec(100_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
            Err(e) => return Err(format!("probe: io_uring_enter: {e}")),
        }
        for cqe in ring.completion() {
            if cqe.user_data() == tag {
                return Ok((cqe.result(), cqe.flags()));
            }
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!("probe: no completion for {what} within 1 s"));
        }
    }
}
