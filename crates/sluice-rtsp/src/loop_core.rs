//! [`RtspServer`] as the engine's loops drive it: the [`RtspCore`] trait of `sluice-proto`, each
//! method the core's own of the same name. Owns only that mapping; what each does is
//! [`RtspServer`]'s.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sluice_proto::rtsp::{ControlIo, DatagramSink, RtspCore};

use super::server::{MediaLibrary, Observer, RtspServer};

impl<M: MediaLibrary, O: Observer, T> RtspCore<T> for RtspServer<'_, M, O, T> {
    fn accept(&mut self, io: T, peer: SocketAddr, now: Instant) -> usize {
        RtspServer::accept(self, io, peer, now)
    }

    fn control(&mut self, key: usize) -> Option<ControlIo<'_, T>> {
        let c = RtspServer::control(self, key)?;
        let should_close = c.should_close();
        Some(ControlIo { io: &mut c.io, out: &mut c.out, should_close })
    }

    fn keys(&self) -> Vec<usize> {
        RtspServer::keys(self)
    }

    fn take_dirty(&mut self, into: &mut Vec<usize>) {
        RtspServer::take_dirty(self, into)
    }

    fn received(&mut self, key: usize, bytes: &[u8], now: Instant) {
        RtspServer::received(self, key, bytes, now)
    }

    fn input_ended(&mut self, key: usize, now: Instant) {
        RtspServer::input_ended(self, key, now)
    }

    fn wants_input(&self, key: usize) -> bool {
        RtspServer::wants_input(self, key)
    }

    fn wrote(&mut self, key: usize, now: Instant) {
        RtspServer::wrote(self, key, now)
    }

    fn disconnect(&mut self, key: usize, now: Instant) {
        RtspServer::disconnect(self, key, now)
    }

    fn remove(&mut self, key: usize, now: Instant) -> Option<T> {
        RtspServer::remove(self, key, now)
    }

    fn rtcp_from(&mut self, from: SocketAddr, now: Instant) {
        RtspServer::rtcp_from(self, from, now)
    }

    fn rtp_from(&mut self, from: SocketAddr, packet: &[u8], now: Instant) {
        RtspServer::rtp_from(self, from, packet, now)
    }

    fn account(&mut self, cpu: Duration, now: Instant) {
        RtspServer::account(self, cpu, now)
    }

    fn next_wake(&self) -> Option<Instant> {
        RtspServer::next_wake(self)
    }

    fn tick(&mut self, now: Instant, wall: Duration) {
        RtspServer::tick(self, now, wall)
    }

    fn farewell(&mut self, now: Instant, wall: Duration) {
        RtspServer::farewell(self, now, wall)
    }

    fn drained(&self) -> bool {
        RtspServer::drained(self)
    }

    fn fill_datagrams(&mut self, batch: &mut dyn DatagramSink, now: Instant) -> bool {
        RtspServer::fill_datagrams(self, batch, now)
    }

    fn sent_datagrams(&self, packets: usize, bytes: usize) {
        RtspServer::sent_datagrams(self, packets, bytes)
    }
}
