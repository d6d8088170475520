//! HTTPS: rustls between the socket and a protocol session, once for every engine.
//!
//! Owns the TLS record layer of a connection ([`TlsSession`], itself a [`Session`]: ciphertext in,
//! ciphertext out, no I/O of its own but reading the file slices it encrypts), the certificate
//! the server presents ([`TlsCertificate`], reloaded from its PEM files on demand, e.g. on
//! SIGHUP: connections accepted afterwards get the new one, with the OCSP response it staples
//! and the expiry it reports, read by [`der`]) and, in [`kernel`], kernel TLS: the setting, the
//! start-up probe ([`ktls_support`]) and rustls's secrets in the engine's words.
//! Engines run a [`TlsService`] exactly as they run any service, so every engine and send
//! strategy serves HTTPS with the same code. With kernel TLS on and taken, a session asks the
//! engine (which owns the socket) to switch once its handshake is out, hands over its keys and
//! from then on passes plain bytes and file segments straight through, so `sendfile` and
//! `splice` stay in use. In user space, file bodies go through the copy path (read, encrypt,
//! send) because the bytes on the wire are no longer the file's; it runs on rustls's unbuffered
//! API so that a file slice is read (`pread`) into one per-thread plaintext buffer and encrypted
//! from there straight into a buffer the outbox owns and sends: no intermediate record copy
//! inside rustls, no copy from rustls into the outbox, no allocation per record.
//! It does not parse HTTP (the wrapped session does) and does not own sockets.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Instant;

use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, UnbufferedStatus, WriteTraffic,
};
use rustls::ServerConfig;
use sluice_proto::conn::Pending;
use sluice_proto::kernel_tls::{KernelTlsKeys, KernelTlsRefusal, RecordAction};
use sluice_proto::{Clock, Job, JobOutput, Outbox, Segment, Session};

use crate::counters::{Counters, Event};
use crate::launch::Service;

mod certificate;
pub mod der;
mod kernel;

pub use certificate::{TlsCertificate, TlsError};
pub use kernel::{ktls_support, KernelTls, KtlsSupport};

/// Ciphertext queued for the socket beyond which a session stops encrypting more of its
/// response until the engine has sent it: bounds each connection's memory like a socket buffer.
const HIGH_WATER: u64 = 256 * 1024;
/// The largest TLS plaintext record (RFC 8446 section 5.1).
const RECORD: usize = 16 * 1024;
/// Plaintext encrypted at a time: three full records, so that their ciphertext (with at most 29
/// bytes of header, nonce and tag each) still fits the 64 KiB buffers the outbox recycles.
const FILE_CHUNK: usize = 3 * RECORD;
/// Room reserved per record for what encryption adds (5-byte header, TLS 1.2's 8-byte explicit
/// nonce, TLS 1.3's content-type byte, 16-byte tag), rounded up.
const RECORD_OVERHEAD: usize = 64;
/// Steps of rustls's state machine one call may take: far above what any input needs (each step
/// consumes a record or emits one), a bound against a loop that would never end.
const MAX_STEPS: usize = 100_000;
/// rustls left the application-data state between two calls with nothing received in between.
const NOT_SETTLED: &str = "rustls not ready for application data right after it said it was";

thread_local! {
    /// Where file bytes are read (`pread`) before rustls encrypts them into the outbox: one
    /// buffer per worker thread, allocated once.
    static CHUNK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A service served over TLS: every session of `S` wrapped in a [`TlsSession`].
pub struct TlsService<S> {
    inner: Arc<S>,
    certificate: Arc<TlsCertificate>,
    counters: Arc<Counters>,
    /// What the kernel takes, probed once at start; `None` with kernel TLS off.
    kernel: Option<Arc<KtlsSupport>>,
}

impl<S> TlsService<S> {
    /// `inner` over TLS with `certificate`, handing established connections to the kernel as
    /// `kernel` says and it allows; handshakes and switches are counted in `counters`.
    pub fn new(
        inner: Arc<S>,
        certificate: Arc<TlsCertificate>,
        counters: Arc<Counters>,
        kernel: KernelTls,
    ) -> Self {
        let kernel = (kernel == KernelTls::Auto).then(|| Arc::new(ktls_support()));
        TlsService { inner, certificate, counters, kernel }
    }
}

impl<S: Service> Service for TlsService<S> {
    type Session = TlsSession<S::Session>;

    fn session(&self, peer: SocketAddr, clock: &Clock) -> Self::Session {
        TlsSession::new(
            self.inner.session(peer, clock),
            self.certificate.config(),
            Arc::clone(&self.counters),
            self.kernel.clone(),
        )
    }
}

/// One connection's TLS state around the session that speaks the protocol inside it.
pub struct TlsSession<S> {
    inner: S,
    /// `None` when rustls refused to start (never with a configuration that loaded).
    tls: Option<UnbufferedServerConnection>,
    /// Ciphertext received and not yet taken by rustls (a partial record, mostly).
    tls_in: Vec<u8>,
    /// The inner session's plaintext output, encrypted into the engine's outbox as it drains.
    inner_out: Outbox,
    /// Decrypted bytes the inner session has not consumed yet.
    plain_in: Vec<u8>,
    /// Offer `plain_in` to the inner session again (new bytes came, or its output drained).
    offer: bool,
    /// The inner outbox had something in it since the inner session last heard it drained.
    inner_busy: bool,
    /// The handshake finished (counted once).
    established: bool,
    /// rustls was ready for application data when [`TlsSession::drive`] last stopped.
    writable: bool,
    /// Some bytes came in (the first say whether the client speaks TLS at all).
    heard: bool,
    /// The connection is over: nothing more is decrypted or encrypted.
    done: bool,
    counters: Arc<Counters>,
    /// What the kernel takes (kernel TLS on), and where this connection is in moving to it.
    kernel_support: Option<Arc<KtlsSupport>>,
    kernel: Kernel,
}

/// A connection's way to kernel TLS.
enum Kernel {
    /// User space encrypts (kernel TLS off, unavailable, or refused for this connection).
    Off,
    /// The handshake is over and the kernel takes the suite: application data waits until the
    /// engine has switched (`Session::kernel_tls_keys`).
    Wanted,
    /// The kernel encrypts and decrypts; rustls only computes key updates.
    On(Box<KernelConnection<ServerConnectionData>>),
}

impl<S: Session> TlsSession<S> {
    fn new(
        inner: S,
        config: Arc<ServerConfig>,
        counters: Arc<Counters>,
        kernel_support: Option<Arc<KtlsSupport>>,
    ) -> Self {
        let tls = UnbufferedServerConnection::new(config).ok();
        TlsSession {
            inner,
            tls,
            tls_in: Vec::new(),
            inner_out: Outbox::new(),
            plain_in: Vec::new(),
            offer: false,
            inner_busy: false,
            established: false,
            writable: false,
            heard: false,
            done: false,
            counters,
            kernel_support,
            kernel: Kernel::Off,
        }
    }

    /// Ends the connection after whatever is queued (an alert, a close_notify).
    fn finish(&mut self, out: &mut Outbox) {
        if !self.done {
            self.done = true;
            if !self.established {
                self.counters.shard(0).add(Event::TlsHandshakeFailures, 1);
            }
        }
        out.close_after_flush();
    }

    /// Runs rustls on the ciphertext received so far: decrypted bytes go to `plain_in`,
    /// handshake records and alerts (a failed connection's too) into `out`. Stops when rustls
    /// needs more input or is ready for application data. Returns whether the peer sent its
    /// close_notify, or `Err` once the connection failed (its alert queued).
    fn drive(&mut self, out: &mut Outbox) -> Result<bool, ()> {
        let Some(tls) = self.tls.as_mut() else { return Err(()) };
        let mut peer_closed = false;
        let mut failed = false;
        self.writable = false;
        let mut handshake = out.buffer();
        handshake.clear();
        for _ in 0..MAX_STEPS {
            let UnbufferedStatus { mut discard, state } = tls.process_tls_records(&mut self.tls_in);
            let stop = match state {
                Err(e) => {
                    tracing::debug!("TLS: {e}");
                    if failed {
                        true
                    } else {
                        // What is left cannot be read; the next rounds only flush the alert
                        // rustls queued.
                        failed = true;
                        discard = self.tls_in.len();
                        false
                    }
                }
                Ok(ConnectionState::ReadTraffic(mut records)) => {
                    while let Some(record) = records.next_record() {
                        match record {
                            Ok(record) => {
                                discard += record.discard;
                                self.plain_in.extend_from_slice(record.payload);
                                self.offer = true;
                            }
                            Err(e) => {
                                tracing::debug!("TLS: {e}");
                                failed = true;
                                break;
                            }
                        }
                    }
                    false
                }
                Ok(ConnectionState::ReadEarlyData(mut records)) => {
                    // Early data is not enabled in the configuration; nothing arrives here.
                    while records.next_record().is_some() {}
                    false
                }
                Ok(ConnectionState::EncodeTlsData(mut record)) => {
                    let start = handshake.len();
                    handshake.resize(start + 4096, 0);
                    let written = match record.encode(&mut handshake[start..]) {
                        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                            handshake.resize(start + required_size, 0);
                            record.encode(&mut handshake[start..])
                        }
                        other => other,
                    };
                    match written {
                        Ok(n) => handshake.truncate(start + n),
                        Err(e) => {
                            tracing::debug!("TLS: {e}");
                            handshake.truncate(start);
                            failed = true;
                        }
                    }
                    false
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => {
                    let mut next = out.buffer();
                    next.clear();
                    out.push(Segment::Bytes(std::mem::replace(&mut handshake, next)));
                    transmit.done();
                    false
                }
                Ok(ConnectionState::PeerClosed) => {
                    peer_closed = true;
                    false
                }
                Ok(ConnectionState::WriteTraffic(_)) => {
                    self.writable = true;
                    if !self.established && !tls.is_handshaking() {
                        self.established = true;
                        self.counters.shard(0).add(Event::TlsHandshakes, 1);
                        if let Some(support) = &self.kernel_support {
                            if tls.negotiated_cipher_suite().is_some_and(|suite| support.takes(suite)) {
                                self.kernel = Kernel::Wanted;
                            } else {
                                self.counters.shard(0).add(Event::TlsKernelFallbackUnsupported, 1);
                            }
                        }
                    }
                    true
                }
                Ok(_) => true,
            };
            self.tls_in.drain(..discard.min(self.tls_in.len()));
            if stop {
                break;
            }
        }
        out.push(Segment::Bytes(handshake));
        if failed {
            Err(())
        } else {
            Ok(peer_closed)
        }
    }

    /// Lets rustls send what it queued of its own (a key update after many records, say) and
    /// tells whether it takes application data now (`Ok(false)`: the handshake is not over).
    /// A record rustls hands out must be written before the state machine moves on, so every
    /// encryption is preceded by this.
    fn settle(&mut self, out: &mut Outbox) -> io::Result<bool> {
        self.drive(out).map_err(|()| io::Error::other("TLS failed"))?;
        Ok(self.writable)
    }

    /// Encrypts with `write` once rustls is ready for application data. `Ok(false)` when it is
    /// not (the handshake is not over).
    fn with_write_traffic(
        &mut self,
        write: impl FnOnce(
            &mut WriteTraffic<'_, rustls::server::ServerConnectionData>,
            &mut Outbox,
        ) -> io::Result<()>,
        out: &mut Outbox,
    ) -> io::Result<bool> {
        if !self.settle(out)? {
            return Ok(false);
        }
        let Some(tls) = self.tls.as_mut() else { return Err(io::Error::other("no TLS state")) };
        let UnbufferedStatus { discard, state } = tls.process_tls_records(&mut self.tls_in);
        let ready = match state {
            Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                write(&mut traffic, out)?;
                true
            }
            Ok(_) => return Err(io::Error::other(NOT_SETTLED)),
            Err(e) => return Err(io::Error::other(e)),
        };
        self.tls_in.drain(..discard.min(self.tls_in.len()));
        Ok(ready)
    }

    /// Encrypts the inner session's output into `out` up to [`HIGH_WATER`], lets the inner
    /// session go on when its output is all encrypted, and closes with a close_notify once it
    /// asked to close.
    fn pump(&mut self, out: &mut Outbox, clock: &Clock) {
        if self.done || matches!(self.kernel, Kernel::Wanted) {
            return;
        }
        loop {
            while out.pending_bytes() < HIGH_WATER && !self.inner_out.is_empty() {
                match self.encrypt_front(out) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => {
                        tracing::debug!("TLS connection ends: {e}");
                        self.finish(out);
                        return;
                    }
                }
            }
            if !self.inner_out.is_empty() {
                return;
            }
            if self.inner_out.closing() {
                let _ = self.with_write_traffic(
                    |traffic, out| {
                        let mut record = out.buffer();
                        record.clear();
                        record.resize(RECORD_OVERHEAD, 0);
                        let n = traffic.queue_close_notify(&mut record).map_err(io::Error::other)?;
                        record.truncate(n);
                        out.push(Segment::Bytes(record));
                        Ok(())
                    },
                    out,
                );
                self.finish(out);
                return;
            }
            if std::mem::take(&mut self.inner_busy) {
                self.inner.on_drained(clock);
                self.offer = true;
            }
            if !(self.offer && self.established && !self.plain_in.is_empty() && self.inner.wants_input()) {
                return;
            }
            self.offer = false;
            let used = self.inner.receive(&self.plain_in, &mut self.inner_out, clock);
            self.plain_in.drain(..used);
            self.note_inner_output();
        }
    }

    fn note_inner_output(&mut self) {
        if !self.inner_out.is_empty() || self.inner_out.closing() {
            self.inner_busy = true;
        }
    }

    /// Encrypts the front of the inner outbox (up to [`FILE_CHUNK`] of it) into a buffer the
    /// engine's outbox owns: in-memory bytes straight from the inner outbox, file bytes read into
    /// the per-thread plaintext buffer first. `Ok(false)` when rustls cannot take application
    /// data yet.
    fn encrypt_front(&mut self, out: &mut Outbox) -> io::Result<bool> {
        if !self.settle(out)? {
            return Ok(false);
        }
        let inner_out = &mut self.inner_out;
        let Some(tls) = self.tls.as_mut() else { return Err(io::Error::other("no TLS state")) };
        let UnbufferedStatus { discard, state } = tls.process_tls_records(&mut self.tls_in);
        let taken = match state {
            Ok(ConnectionState::WriteTraffic(mut traffic)) => match inner_out.front() {
                None => 0,
                Some(Pending::Bytes(bytes)) => {
                    let n = bytes.len().min(FILE_CHUNK);
                    encrypt_into(&mut traffic, &bytes[..n], out)?;
                    n
                }
                Some(Pending::File(slice)) => CHUNK.with_borrow_mut(|chunk| {
                    if chunk.len() < FILE_CHUNK {
                        chunk.resize(FILE_CHUNK, 0);
                    }
                    let want = (slice.len as usize).min(FILE_CHUNK);
                    let got = slice.file.read_at(&mut chunk[..want], slice.offset)?;
                    if got == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "file shorter than its response",
                        ));
                    }
                    encrypt_into(&mut traffic, &chunk[..got], out)?;
                    Ok::<usize, io::Error>(got)
                })?,
            },
            Ok(_) => return Err(io::Error::other(NOT_SETTLED)),
            Err(e) => return Err(io::Error::other(e)),
        };
        self.tls_in.drain(..discard.min(self.tls_in.len()));
        inner_out.advance(taken as u64);
        Ok(true)
    }
}

impl<S: Session> Session for TlsSession<S> {
    fn receive(&mut self, input: &[u8], out: &mut Outbox, clock: &Clock) -> usize {
        if self.kernel_on() {
            return self.receive_plain(input, out, clock);
        }
        if self.done {
            return input.len();
        }
        if !std::mem::replace(&mut self.heard, true) && input.first().is_some_and(u8::is_ascii_uppercase) {
            // A request line (`GET / HTTP/1.1`), not a TLS record (whose first byte is a content
            // type, 0x14 to 0x18): say so in plain HTTP, as nginx does, rather than close
            // without a word.
            plaintext_refusal(out, clock);
            self.finish(out);
            return input.len();
        }
        self.tls_in.extend_from_slice(input);
        match self.drive(out) {
            Ok(peer_closed) => {
                self.pump(out, clock);
                if peer_closed && self.inner_out.is_empty() {
                    self.finish(out);
                }
            }
            Err(()) => self.finish(out),
        }
        input.len()
    }

    fn deadline(&self) -> Option<Instant> {
        // Until the handshake is over this is the session's header deadline: a client that
        // never finishes it is cut when one that never sends a request would be.
        self.inner.deadline()
    }

    fn on_drained(&mut self, clock: &Clock) {
        if self.kernel_on() {
            self.inner.on_drained(clock);
        }
    }

    fn refill(&mut self, out: &mut Outbox, clock: &Clock) {
        if self.kernel_on() {
            // What was decrypted in user space before the switch goes first.
            if !self.plain_in.is_empty() && self.inner.wants_input() {
                let plain = std::mem::take(&mut self.plain_in);
                let used = self.inner.receive(&plain, out, clock);
                self.plain_in = plain;
                self.plain_in.drain(..used);
            }
            self.inner.refill(out, clock);
            return;
        }
        self.pump(out, clock);
    }

    fn on_deadline(&mut self, out: &mut Outbox, clock: &Clock) {
        if self.kernel_on() {
            return self.inner.on_deadline(out, clock);
        }
        if self.done {
            return;
        }
        if !self.established {
            // The handshake did not finish in time: there is no channel to say 408 on.
            self.finish(out);
            return;
        }
        self.inner.on_deadline(&mut self.inner_out, clock);
        self.note_inner_output();
        self.pump(out, clock);
    }

    fn on_shutdown(&mut self, out: &mut Outbox) -> bool {
        if self.kernel_on() {
            return self.inner.on_shutdown(out);
        }
        if !self.established {
            return true;
        }
        // A last word the inner session queues is encrypted by the next refill.
        let idle = self.inner.on_shutdown(&mut self.inner_out);
        self.note_inner_output();
        let _ = out;
        idle
    }

    fn wants_input(&self) -> bool {
        match self.kernel {
            Kernel::Off => !self.established || self.inner.wants_input(),
            Kernel::Wanted => false,
            Kernel::On(_) => self.inner.wants_input(),
        }
    }

    fn take_job(&mut self) -> Option<Job> {
        self.inner.take_job()
    }

    fn job_done(&mut self, output: JobOutput, out: &mut Outbox, clock: &Clock) {
        if self.kernel_on() {
            return self.inner.job_done(output, out, clock);
        }
        self.inner.job_done(output, &mut self.inner_out, clock);
        self.note_inner_output();
        self.offer = true;
        self.pump(out, clock);
    }

    fn job_refused(&mut self, out: &mut Outbox, clock: &Clock) {
        if self.kernel_on() {
            return self.inner.job_refused(out, clock);
        }
        self.inner.job_refused(&mut self.inner_out, clock);
        self.note_inner_output();
        self.offer = true;
        self.pump(out, clock);
    }

    fn on_close(&mut self, out: &Outbox) {
        if self.kernel_on() {
            self.inner.on_close(out);
        } else {
            self.inner.on_close(&self.inner_out);
        }
    }

    fn wants_kernel_tls(&self) -> bool {
        !self.done && matches!(self.kernel, Kernel::Wanted)
    }

    fn kernel_tls_keys(&mut self, out: &mut Outbox) -> Option<KernelTlsKeys> {
        if !self.tls_in.is_empty() {
            // Part of a record the kernel will never see: this connection stays here.
            self.kernel_tls_result(Err(KernelTlsRefusal::InputPending));
            return None;
        }
        let tls = self.tls.take()?;
        let tls13 = tls.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
        let keys = tls.dangerous_into_kernel_connection().ok().and_then(|(secrets, connection)| {
            let tx = kernel::traffic_keys(tls13, secrets.tx)?;
            let rx = kernel::traffic_keys(tls13, secrets.rx)?;
            Some((KernelTlsKeys { tx, rx }, connection))
        });
        match keys {
            Some((keys, connection)) => {
                self.kernel = Kernel::On(Box::new(connection));
                Some(keys)
            }
            None => {
                // rustls is gone and the kernel has nothing: the connection cannot go on.
                tracing::debug!("kernel TLS: rustls gave no usable secrets");
                self.kernel = Kernel::Off;
                self.counters.shard(0).add(Event::TlsKernelFallbackKeys, 1);
                self.finish(out);
                None
            }
        }
    }

    fn kernel_tls_result(&mut self, result: Result<(), KernelTlsRefusal>) {
        let event = match result {
            Ok(()) => Event::TlsKernelConnections,
            Err(KernelTlsRefusal::InputPending) => Event::TlsKernelFallbackInput,
            Err(KernelTlsRefusal::Ulp) => Event::TlsKernelFallbackUlp,
            Err(KernelTlsRefusal::Keys) => {
                // rustls is gone: the engine closes the connection.
                self.done = true;
                Event::TlsKernelFallbackKeys
            }
        };
        self.counters.shard(0).add(event, 1);
        if matches!(result, Err(KernelTlsRefusal::InputPending | KernelTlsRefusal::Ulp)) {
            self.kernel = Kernel::Off;
        }
    }

    fn kernel_tls_record(&mut self, content_type: u8, body: &[u8]) -> RecordAction {
        match &mut self.kernel {
            Kernel::On(connection) => kernel::read_record(connection, content_type, body),
            _ => RecordAction::Close,
        }
    }
}

impl<S: Session> TlsSession<S> {
    fn kernel_on(&self) -> bool {
        matches!(self.kernel, Kernel::On(_))
    }

    /// Plain bytes from a kernel-TLS socket: straight to the inner session, after what was
    /// decrypted in user space before the switch.
    fn receive_plain(&mut self, input: &[u8], out: &mut Outbox, clock: &Clock) -> usize {
        if self.plain_in.is_empty() {
            return self.inner.receive(input, out, clock);
        }
        self.plain_in.extend_from_slice(input);
        let plain = std::mem::take(&mut self.plain_in);
        let used = self.inner.receive(&plain, out, clock);
        self.plain_in = plain;
        self.plain_in.drain(..used);
        input.len()
    }
}

/// Encrypts `plain` (in full records of at most [`RECORD`] bytes) into a buffer the outbox owns
/// and queues it: rustls writes the records in place there, the engine sends them from there.
fn encrypt_into(
    traffic: &mut WriteTraffic<'_, rustls::server::ServerConnectionData>,
    plain: &[u8],
    out: &mut Outbox,
) -> io::Result<()> {
    let mut record = out.buffer();
    record.clear();
    record.resize(plain.len() + plain.len().div_ceil(RECORD).max(1) * RECORD_OVERHEAD, 0);
    let n = match traffic.encrypt(plain, &mut record) {
        Err(EncryptError::InsufficientSize(InsufficientSizeError { required_size })) => {
            record.resize(required_size, 0);
            traffic.encrypt(plain, &mut record)
        }
        other => other,
    }
    .map_err(io::Error::other)?;
    record.truncate(n);
    out.push(Segment::Bytes(record));
    Ok(())
}

/// The answer to plain HTTP sent to the HTTPS port: a 400 in plain HTTP that says so.
fn plaintext_refusal(out: &mut Outbox, clock: &Clock) {
    use sluice_proto::http::response::{write_head, Persistence};
    use sluice_proto::http::Status;
    const BODY: &[u8] = b"400 Bad Request: plain HTTP request sent to the HTTPS port; use https://\n";
    let mut head = out.buffer();
    head.clear();
    let headers = [("Content-Type", "text/plain; charset=utf-8".into())];
    write_head(&mut head, Status::BAD_REQUEST, &headers, Some(BODY.len() as u64), Persistence::Close, clock);
    head.extend_from_slice(BODY);
    out.push(Segment::Bytes(head));
}

#[cfg(test)]
mod tests;
