//! The few facts HTTPS needs from DER it is handed: a certificate's serial number and validity
//! (RFC 5280 section 4.1), and an OCSP response's status, serial and times (RFC 6960 section
//! 4.2.1), by walking the structure as far as those fields and no further.
//!
//! It checks no signature (rustls checks the key against the certificate; the client checks the
//! OCSP responder's signature) and parses nothing else.

/// What a DER structure was missing or got wrong, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DerError(String);

/// What a certificate says of itself that an operator watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFacts {
    /// Its serial number's content octets.
    pub serial: Vec<u8>,
    /// notAfter, in seconds since the Unix epoch.
    pub not_after: i64,
}

/// What a stapled OCSP response must be checked for before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcspFacts {
    /// The serial number the (first) single response is about.
    pub serial: Vec<u8>,
    /// "good", "revoked" or "unknown".
    pub status: &'static str,
    /// nextUpdate, in seconds since the Unix epoch; `None` when the responder gave none.
    pub next_update: Option<i64>,
}

impl OcspFacts {
    /// Whether a client would take this response for the certificate with `serial` at `now`
    /// (seconds since the Unix epoch): about it, "good", and before its nextUpdate.
    pub fn staplable(&self, serial: &[u8], now: i64) -> Result<(), String> {
        if self.serial != serial {
            return Err("it is about another certificate (its serial number differs)".into());
        }
        if self.status != "good" {
            return Err(format!("it says the certificate is {}", self.status));
        }
        match self.next_update {
            Some(next) if next <= now => Err(format!(
                "it expired {} h ago (its nextUpdate has passed): fetch a new one",
                (now - next) / 3600
            )),
            _ => Ok(()),
        }
    }
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const ENUMERATED: u8 = 0x0a;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0]` constructed: a certificate's version, an OCSP response's bytes or nextUpdate.
const CONTEXT_0: u8 = 0xa0;
/// id-pkix-ocsp-basic, 1.3.6.1.5.5.7.48.1.1 (RFC 6960 section 4.2.1).
const OCSP_BASIC: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];

/// A certificate's serial number and notAfter.
pub fn certificate(der: &[u8]) -> Result<CertificateFacts, DerError> {
    let mut certificate = Reader(der).inside(SEQUENCE, "certificate")?;
    let mut tbs = certificate.inside(SEQUENCE, "tbsCertificate")?;
    tbs.skip_if(CONTEXT_0);
    let serial = tbs.take(INTEGER, "serialNumber")?.to_vec();
    tbs.take(SEQUENCE, "signature algorithm")?;
    tbs.take(SEQUENCE, "issuer")?;
    let mut validity = tbs.inside(SEQUENCE, "validity")?;
    validity.time("notBefore")?;
    let not_after = validity.time("notAfter")?;
    Ok(CertificateFacts { serial, not_after })
}

/// An OCSP response's first single response: whose, its status and its nextUpdate. A response
/// whose responder reported an error, or that is not a basic response, is refused.
pub fn ocsp_response(der: &[u8]) -> Result<OcspFacts, DerError> {
    let mut response = Reader(der).inside(SEQUENCE, "OCSPResponse")?;
    let status = response.take(ENUMERATED, "responseStatus")?;
    let refused = match status {
        [0] => None,
        [1] => Some("malformedRequest"),
        [2] => Some("internalError"),
        [3] => Some("tryLater"),
        [5] => Some("sigRequired"),
        [6] => Some("unauthorized"),
        _ => Some("an unknown status"),
    };
    if let Some(status) = refused {
        return Err(DerError(format!("the responder answered {status}, not a response")));
    }
    let mut bytes = response.inside(CONTEXT_0, "responseBytes")?.inside(SEQUENCE, "responseBytes")?;
    if bytes.take(OID, "responseType")? != OCSP_BASIC {
        return Err(DerError("not a basic OCSP response (id-pkix-ocsp-basic)".into()));
    }
    let basic = bytes.take(OCTET_STRING, "response")?;
    let mut basic = Reader(basic).inside(SEQUENCE, "BasicOCSPResponse")?;
    let mut data = basic.inside(SEQUENCE, "tbsResponseData")?;
    data.skip_if(CONTEXT_0);
    data.any("responderID")?;
    data.take(GENERALIZED_TIME, "producedAt")?;
    let mut single = data.inside(SEQUENCE, "responses")?.inside(SEQUENCE, "SingleResponse")?;
    let mut cert_id = single.inside(SEQUENCE, "certID")?;
    cert_id.take(SEQUENCE, "hashAlgorithm")?;
    cert_id.take(OCTET_STRING, "issuerNameHash")?;
    cert_id.take(OCTET_STRING, "issuerKeyHash")?;
    let serial = cert_id.take(INTEGER, "serialNumber")?.to_vec();
    let status = match single.any("certStatus")?.0 {
        0x80 => "good",
        0xa1 => "revoked",
        0x82 => "unknown",
        tag => return Err(DerError(format!("certStatus has an unknown tag {tag:#04x}"))),
    };
    single.time("thisUpdate")?;
    let next_update = match single.peek() {
        Some(CONTEXT_0) => Some(single.inside(CONTEXT_0, "nextUpdate")?.time("nextUpdate")?),
        _ => None,
    };
    Ok(OcspFacts { serial, status, next_update })
}

/// The DER still to read at one level of nesting.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next element's tag and content.
    fn any(&mut self, what: &str) -> Result<(u8, &'a [u8]), DerError> {
        let cut = || DerError(format!("{what}: the DER ends early"));
        let (&tag, rest) = self.0.split_first().ok_or_else(cut)?;
        let (&first, rest) = rest.split_first().ok_or_else(cut)?;
        let (len, rest) = match first {
            0..=0x7f => (usize::from(first), rest),
            0x81..=0x84 => {
                let octets = usize::from(first & 0x7f);
                let (len, rest) = rest.split_at_checked(octets).ok_or_else(cut)?;
                (len.iter().fold(0usize, |n, &b| n << 8 | usize::from(b)), rest)
            }
            _ => return Err(DerError(format!("{what}: a length DER does not allow"))),
        };
        let (content, rest) = rest.split_at_checked(len).ok_or_else(cut)?;
        self.0 = rest;
        Ok((tag, content))
    }

    /// The next element's content, which must have `tag`.
    fn take(&mut self, tag: u8, what: &str) -> Result<&'a [u8], DerError> {
        // The tag first: garbage is named as such rather than as a length running past the end.
        match self.peek() {
            Some(found) if found != tag => {
                Err(DerError(format!("{what}: expected tag {tag:#04x}, found {found:#04x}")))
            }
            _ => self.any(what).map(|(_, content)| content),
        }
    }

    /// A reader of the next element's content, which must have `tag`.
    fn inside(&mut self, tag: u8, what: &str) -> Result<Reader<'a>, DerError> {
        self.take(tag, what).map(Reader)
    }

    fn skip_if(&mut self, tag: u8) {
        if self.peek() == Some(tag) {
            let _ = self.any("");
        }
    }

    /// The next element as a UTCTime or GeneralizedTime, in seconds since the Unix epoch.
    fn time(&mut self, what: &str) -> Result<i64, DerError> {
        let (tag, text) = self.any(what)?;
        let bad = || DerError(format!("{what}: not a time DER allows"));
        let digits = |s: &[u8]| -> Result<i64, DerError> {
            s.iter().try_fold(0i64, |n, &b| {
                if b.is_ascii_digit() {
                    Ok(n * 10 + i64::from(b - b'0'))
                } else {
                    Err(bad())
                }
            })
        };
        // RFC 5280 section 4.1.2.5: UTCTime years 50-99 are 19YY, 00-49 are 20YY.
        let (year, rest) = match tag {
            UTC_TIME if text.len() >= 13 => {
                let yy = digits(&text[..2])?;
                (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
            }
            GENERALIZED_TIME if text.len() >= 15 => (digits(&text[..4])?, &text[4..]),
            _ => return Err(bad()),
        };
        // Fractional seconds (".123") may follow in an OCSP response; the time ends in 'Z'.
        if rest.last() != Some(&b'Z') {
            return Err(bad());
        }
        let field = |at: usize| digits(&rest[at..at + 2]);
        let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
            return Err(bad());
        }
        Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_meets_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 28), 20_785);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn times_of_both_kinds_read_as_unix_seconds() {
        let read = |der: &[u8]| Reader(der).time("t");
        assert_eq!(read(b"\x17\x0d491231235959Z"), Ok(2_524_607_999));
        assert_eq!(read(b"\x17\x0d500101000000Z"), Ok(-631_152_000));
        assert_eq!(read(b"\x18\x0f20261128000000Z"), Ok(20_785 * 86_400));
        assert_eq!(read(b"\x18\x1320261128000000.123Z"), Ok(20_785 * 86_400));
        assert!(read(b"\x18\x0f20261328000000Z").is_err(), "month 13");
        assert!(read(b"\x18\x0f2026112800000+0").is_err(), "no Z");
        assert!(read(b"\x18\x20").is_err(), "cut");
    }

    /// A DER element.
    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match content.len() {
            n @ 0..=0x7f => out.push(n as u8),
            n => out.extend([0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(content);
        out
    }

    /// An OCSP response (unsigned: nothing here checks signatures) about serial 0x5e.
    fn ocsp(status_tag: u8, next_update: Option<&[u8]>) -> Vec<u8> {
        let cert_id = [
            tlv(SEQUENCE, &tlv(OID, b"\x2b\x0e\x03\x02\x1a")),
            tlv(OCTET_STRING, &[1; 20]),
            tlv(OCTET_STRING, &[2; 20]),
            tlv(INTEGER, &[0x5e]),
        ]
        .concat();
        let mut single =
            [tlv(SEQUENCE, &cert_id), vec![status_tag, 0], tlv(GENERALIZED_TIME, b"20261127000000Z")]
                .concat();
        if let Some(next) = next_update {
            single.extend(tlv(CONTEXT_0, &tlv(GENERALIZED_TIME, next)));
        }
        let data = [
            tlv(0xa2, &tlv(OCTET_STRING, &[3; 20])),
            tlv(GENERALIZED_TIME, b"20261127000000Z"),
            tlv(SEQUENCE, &tlv(SEQUENCE, &single)),
        ]
        .concat();
        let basic = tlv(SEQUENCE, &[tlv(SEQUENCE, &data), tlv(SEQUENCE, &[]), tlv(0x03, &[0])].concat());
        let bytes = tlv(SEQUENCE, &[tlv(OID, OCSP_BASIC), tlv(OCTET_STRING, &basic)].concat());
        tlv(SEQUENCE, &[tlv(ENUMERATED, &[0]), tlv(CONTEXT_0, &bytes)].concat())
    }

    #[test]
    fn an_ocsp_response_is_stapled_only_while_good_current_and_ours() {
        let now = days_from_civil(2026, 11, 28) * 86_400;
        let good = ocsp_response(&ocsp(0x80, Some(b"20261129000000Z"))).unwrap();
        assert_eq!(good, OcspFacts { serial: vec![0x5e], status: "good", next_update: Some(now + 86_400) });
        assert_eq!(good.staplable(&[0x5e], now), Ok(()));
        let error = good.staplable(&[0x5e], now + 3 * 86_400).unwrap_err();
        assert!(error.starts_with("it expired 48 h ago"), "{error}");
        assert!(good.staplable(&[0x5f], now).unwrap_err().contains("another certificate"));
        let revoked = ocsp_response(&ocsp(0x82, None)).unwrap();
        assert_eq!((revoked.status, revoked.next_update), ("unknown", None));
        assert_eq!(revoked.staplable(&[0x5e], now), Err("it says the certificate is unknown".into()));
    }

    #[test]
    fn a_refused_or_cut_ocsp_response_says_why() {
        // OCSPResponse { responseStatus tryLater }.
        let error = ocsp_response(b"\x30\x03\x0a\x01\x03").unwrap_err();
        assert_eq!(error.to_string(), "the responder answered tryLater, not a response");
        let error = ocsp_response(b"\x30\x03\x0a\x01\x00").unwrap_err();
        assert_eq!(error.to_string(), "responseBytes: the DER ends early");
        assert!(ocsp_response(b"not DER at all").is_err());
    }
}
