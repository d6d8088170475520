//! The benchmark endpoints under `/bench/`, with the semantics of the Sprout report's
//! `BenchmarkController` (experiment E4), so sluice's execution models face the same work.
//!
//! Owns what each endpoint computes and how its query is validated. CPU-bound endpoints answer
//! with [`Reply::Compute`] (every engine runs them on its CPU pool; the threads engine's
//! connection thread waits for the result) and `latency` answers with [`Reply::After`] (a timer on the connection, no thread held on
//! event-loop engines). It does not decide where jobs run; the engine does.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_proto::http::{Body, Reply, Response, Status};

/// Longest `latency?ms=` accepted: long enough for any experiment, short enough that a client
/// cannot park connections for minutes.
pub const MAX_LATENCY_MS: u64 = 10_000;
/// Largest `cpu?n=`: Fibonacci(93) is the last that fits in 64 bits.
pub const MAX_FIBONACCI: u64 = 93;
/// Largest `cpu-heavy?limit=`: a sieve of this size takes tens of milliseconds and 10 MB.
pub const MAX_SIEVE: u64 = 10_000_000;

/// Answers a `/bench/...` path, or `None` when the path is not a benchmark endpoint.
pub fn route(path: &str, query: Option<&str>) -> Option<Reply> {
    let name = path.strip_prefix("/bench/")?;
    Some(match name {
        "hello" => text("Hello, World!".into()).into(),
        "health" => text("OK".into()).into(),
        "json" => json().into(),
        "cpu" => match number(query, "n", 35, MAX_FIBONACCI) {
            Ok(n) => {
                Reply::Compute(Box::new(move || text(format!("Fibonacci({n}) = {}", fibonacci(n))).into()))
            }
            Err(e) => bad_request(e).into(),
        },
        "cpu-heavy" => match number(query, "limit", 10_000, MAX_SIEVE) {
            Ok(limit) => Reply::Compute(Box::new(move || {
                text(format!("Primes up to {limit}: {}", count_primes(limit))).into()
            })),
            Err(e) => bad_request(e).into(),
        },
        "latency" => match number(query, "ms", 100, MAX_LATENCY_MS) {
            Ok(ms) => Reply::After(Duration::from_millis(ms), text(format!("Delayed response after {ms}ms"))),
            Err(e) => bad_request(e).into(),
        },
        "mixed" => Reply::Compute(Box::new(|| {
            let fib = fibonacci(20);
            Reply::After(Duration::from_millis(50), text(format!("Mixed workload result: {fib}")))
        })),
        _ => Response::error(Status::NOT_FOUND).into(),
    })
}

/// Fibonacci by iteration, as the seed's `fibonacci(int)`; `n` is at most [`MAX_FIBONACCI`].
pub fn fibonacci(n: u64) -> u64 {
    if n <= 1 {
        return n;
    }
    let (mut prev, mut curr) = (0u64, 1u64);
    for _ in 2..=n {
        (prev, curr) = (curr, prev + curr);
    }
    curr
}

/// Primes up to `max` by the sieve of Eratosthenes, as the seed's `countPrimes(int)`.
pub fn count_primes(max: u64) -> usize {
    if max < 2 {
        return 0;
    }
    let max = max as usize;
    let mut is_prime = vec![true; max + 1];
    is_prime[0] = false;
    is_prime[1] = false;
    let mut i = 2;
    while i * i <= max {
        if is_prime[i] {
            let mut j = i * i;
            while j <= max {
                is_prime[j] = false;
                j += i;
            }
        }
        i += 1;
    }
    is_prime.iter().filter(|&&p| p).count()
}

fn text(body: String) -> Response {
    Response {
        status: Status::OK,
        headers: vec![("Content-Type", Cow::Borrowed("text/plain; charset=utf-8"))],
        body: Body::Bytes(Cow::Owned(body.into_bytes())),
    }
}

fn json() -> Response {
    let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let body = format!(
        "{{\"status\":\"success\",\"timestamp\":{millis},\"data\":{{\"message\":\"Performance test response\",\
\"server\":\"sluice\",\"version\":\"{}\"}}}}",
        env!("CARGO_PKG_VERSION")
    );
    Response {
        status: Status::OK,
        headers: vec![("Content-Type", Cow::Borrowed("application/json"))],
        body: Body::Bytes(Cow::Owned(body.into_bytes())),
    }
}

fn bad_request(why: String) -> Response {
    Response {
        status: Status::BAD_REQUEST,
        headers: vec![("Content-Type", Cow::Borrowed("text/plain; charset=utf-8"))],
        body: Body::Bytes(Cow::Owned(format!("400 Bad Request: {why}\n").into_bytes())),
    }
}

/// Reads a whole-number query parameter: absent means `default`; not a number, or above `max`,
/// is an error that says which.
fn number(query: Option<&str>, key: &str, default: u64, max: u64) -> Result<u64, String> {
    let Some(raw) =
        query.into_iter().flat_map(|q| q.split('&')).find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
    else {
        return Ok(default);
    };
    if raw.is_empty() || raw.len() > 12 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{key} must be a whole number from 0 to {max}"));
    }
    match raw.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("{key} must be at most {max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_match_the_seed() {
        assert_eq!(fibonacci(35), 9_227_465);
        assert_eq!(fibonacci(20), 6765);
        assert_eq!(fibonacci(93), 12_200_160_415_121_876_738);
        assert_eq!(count_primes(10_000), 1229);
        assert_eq!(count_primes(1), 0);
        assert_eq!(count_primes(2), 1);
    }

    #[test]
    fn query_values_are_validated() {
        assert_eq!(number(None, "n", 35, 93), Ok(35));
        assert_eq!(number(Some("n=7"), "n", 35, 93), Ok(7));
        assert_eq!(number(Some("x=1&n=8"), "n", 35, 93), Ok(8));
        assert!(number(Some("n=94"), "n", 35, 93).is_err());
        assert!(number(Some("n=-1"), "n", 35, 93).is_err());
        assert!(number(Some("n=abc"), "n", 35, 93).is_err());
        assert!(number(Some("n="), "n", 35, 93).is_err());
        assert!(number(Some("n=99999999999999999999"), "n", 35, 93).is_err());
        assert!(
            matches!(route("/bench/latency", Some("ms=10001")), Some(Reply::Now(r)) if r.status == Status::BAD_REQUEST)
        );
        assert!(
            matches!(route("/bench/latency", Some("ms=5")), Some(Reply::After(d, _)) if d == Duration::from_millis(5))
        );
        assert!(matches!(route("/bench/cpu", None), Some(Reply::Compute(_))));
        assert!(route("/other", None).is_none());
    }
}
