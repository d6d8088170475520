//! Limits per client address: open connections and requests per second (a token bucket), kept
//! in a table of bounded size; and the setting of RTSP sessions per address (which the RTSP
//! session table applies, since it holds the sessions).
//!
//! Owns applying the `[clients]` settings (which the configuration's table defines), the table of what each address holds (the catalogue's bounded
//! least-recently-used map, one entry per address, so a flood of distinct addresses evicts the
//! quietest rather than growing memory) and the refusal counts `/metrics` reports. It does not
//! answer requests (the app turns a refusal into 429 with `Retry-After`) and it does not guard
//! paths (see [`crate::access`]).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sluice_proto::lru::Lru;

use crate::config::ClientsSection;

/// What one address holds.
#[derive(Debug, Clone, Copy)]
struct Client {
    connections: u32,
    tokens: f64,
    refilled: Instant,
}

/// Which limit refused a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitRefusal {
    /// Too many open connections.
    Connections,
    /// Too many requests per second.
    Rate,
}

/// The limits as the server applies them.
#[derive(Debug)]
pub struct ClientLimits {
    settings: ClientsSection,
    table: Mutex<Lru<IpAddr, Client>>,
    refused_connections: AtomicU64,
    refused_requests: AtomicU64,
}

impl ClientLimits {
    /// Limits per `settings`.
    pub fn new(settings: ClientsSection) -> ClientLimits {
        let size = settings.table_size.max(1);
        ClientLimits {
            settings,
            table: Mutex::new(Lru::new(size as u64)),
            refused_connections: AtomicU64::new(0),
            refused_requests: AtomicU64::new(0),
        }
    }

    /// Whether any limit is set (else nothing is tracked).
    pub fn is_on(&self) -> bool {
        self.settings.max_connections_per_ip > 0 || self.settings.requests_per_second > 0.0
    }

    fn with_client<T>(&self, ip: IpAddr, now: Instant, f: impl FnOnce(&mut Client) -> T) -> T {
        let mut table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let burst = f64::from(self.settings.burst.max(1));
        let mut client =
            table.get(&ip).copied().unwrap_or(Client { connections: 0, tokens: burst, refilled: now });
        let result = f(&mut client);
        table.insert(ip, client, 1);
        result
    }

    /// A connection from `ip` opens: false when it is one too many (the caller refuses it and
    /// must not call [`ClientLimits::disconnected`]).
    pub fn connected(&self, ip: IpAddr) -> bool {
        let max = self.settings.max_connections_per_ip;
        if max == 0 {
            return true;
        }
        let admitted = self.with_client(ip, Instant::now(), |c| {
            let admitted = c.connections < max;
            if admitted {
                c.connections += 1;
            }
            admitted
        });
        if !admitted {
            self.refused_connections.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// A connection [`ClientLimits::connected`] admitted has closed.
    pub fn disconnected(&self, ip: IpAddr) {
        if self.settings.max_connections_per_ip > 0 {
            self.with_client(ip, Instant::now(), |c| c.connections = c.connections.saturating_sub(1));
        }
    }

    /// A request from `ip` at `now`: `Err(wait)` when it comes too soon, with how long until
    /// one more would be allowed.
    pub fn request(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let rate = self.settings.requests_per_second;
        if rate <= 0.0 {
            return Ok(());
        }
        let burst = f64::from(self.settings.burst.max(1));
        let verdict = self.with_client(ip, now, |c| {
            let elapsed = now.saturating_duration_since(c.refilled).as_secs_f64();
            c.tokens = (c.tokens + elapsed * rate).min(burst);
            c.refilled = now;
            if c.tokens >= 1.0 {
                c.tokens -= 1.0;
                Ok(())
            } else {
                Err(Duration::from_secs_f64((1.0 - c.tokens) / rate))
            }
        });
        if verdict.is_err() {
            self.refused_requests.fetch_add(1, Ordering::Relaxed);
        }
        verdict
    }

    /// Addresses in the table now (never more than `table_size`).
    pub fn tracked(&self) -> usize {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Refusals so far, by limit.
    pub fn refusals(&self) -> [(LimitRefusal, u64); 2] {
        [
            (LimitRefusal::Connections, self.refused_connections.load(Ordering::Relaxed)),
            (LimitRefusal::Rate, self.refused_requests.load(Ordering::Relaxed)),
        ]
    }
}

impl LimitRefusal {
    /// The label in `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            LimitRefusal::Connections => "connections",
            LimitRefusal::Rate => "rate",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0x7f00_0000 | n))
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let limits =
            ClientLimits::new(ClientsSection { requests_per_second: 10.0, burst: 3, ..Default::default() });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limits.request(ip(1), t0), Ok(()));
        }
        let wait = limits.request(ip(1), t0).unwrap_err();
        assert!(wait > Duration::from_millis(90) && wait <= Duration::from_millis(100), "{wait:?}");
        assert_eq!(limits.request(ip(2), t0), Ok(()), "another address has its own bucket");
        assert_eq!(limits.request(ip(1), t0 + Duration::from_millis(100)), Ok(()));
        assert_eq!(limits.refusals()[1], (LimitRefusal::Rate, 1));
    }

    #[test]
    fn connections_are_counted_per_address() {
        let limits = ClientLimits::new(ClientsSection { max_connections_per_ip: 2, ..Default::default() });
        assert!(limits.connected(ip(1)) && limits.connected(ip(1)));
        assert!(!limits.connected(ip(1)));
        assert!(limits.connected(ip(2)));
        limits.disconnected(ip(1));
        assert!(limits.connected(ip(1)));
        assert_eq!(limits.refusals()[0], (LimitRefusal::Connections, 1));
    }

    #[test]
    fn a_flood_of_addresses_keeps_the_table_bounded() {
        let limits = ClientLimits::new(ClientsSection {
            requests_per_second: 1.0,
            table_size: 1000,
            ..Default::default()
        });
        let t0 = Instant::now();
        for n in 0..100_000 {
            let _ = limits.request(ip(n), t0);
        }
        assert_eq!(limits.tracked(), 1000);
    }
}
