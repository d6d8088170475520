//! Generated upload payloads: the seed's two message kinds (an HTML email of about 50 KB and an
//! 80-byte SMS) at any size, deterministic for a seed, so runs and tests can be compared.
//!
//! The email is what marketing mail looks like: a table layout with inline styles repeated per
//! block (mail clients ignore style sheets), links with tracking parameters, and prose drawn from
//! a vocabulary. That repetition is why the seed saw gzip take 50 KB to 2 KB.

/// A kind of generated payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// An HTML email (`text/html`).
    Email,
    /// A short text message (`text/plain`).
    Sms,
    /// Incompressible bytes (`application/octet-stream`).
    Random,
}

impl PayloadKind {
    /// Parses `email`, `sms` or `random`.
    pub fn parse(s: &str) -> Option<PayloadKind> {
        match s {
            "email" => Some(PayloadKind::Email),
            "sms" => Some(PayloadKind::Sms),
            "random" => Some(PayloadKind::Random),
            _ => None,
        }
    }

    /// Parses a payload spec `KIND:SIZE`, e.g. `email:50KB` or `random:5M`; SIZE is read by the
    /// one size parser ([`sluice_proto::size_text`]: `5M` is 5 MiB, `5MB` is 5,000,000 bytes).
    pub fn parse_spec(spec: &str) -> Result<(PayloadKind, usize), String> {
        let (kind, size) =
            spec.split_once(':').ok_or_else(|| format!("`{spec}` is not KIND:SIZE, e.g. email:50KB"))?;
        let kind = PayloadKind::parse(kind.trim())
            .ok_or_else(|| format!("unknown payload kind `{kind}` (email, sms or random)"))?;
        Ok((kind, sluice_proto::size_text::parse_usize(size)?))
    }

    /// The payload's media type.
    pub fn content_type(self) -> &'static str {
        match self {
            PayloadKind::Email => "text/html; charset=utf-8",
            PayloadKind::Sms => "text/plain; charset=utf-8",
            PayloadKind::Random => "application/octet-stream",
        }
    }

    /// The file extension for keys.
    pub fn extension(self) -> &'static str {
        match self {
            PayloadKind::Email => "html",
            PayloadKind::Sms => "txt",
            PayloadKind::Random => "bin",
        }
    }

    /// `len` bytes of this kind, different for each `seed`.
    pub fn generate(self, len: usize, seed: u64) -> Vec<u8> {
        match self {
            PayloadKind::Email => email_html(len, seed),
            PayloadKind::Sms => sms(len, seed),
            PayloadKind::Random => {
                let mut rng = Rng(seed | 1);
                (0..len).map(|_| rng.next() as u8).collect()
            }
        }
    }
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "your",
    "order",
    "account",
    "offer",
    "today",
    "new",
    "season",
    "collection",
    "free",
    "shipping",
    "members",
    "exclusive",
    "save",
    "percent",
    "limited",
    "time",
    "discover",
    "our",
    "latest",
    "arrivals",
    "update",
    "preferences",
    "thank",
    "you",
    "for",
    "shopping",
    "with",
    "us",
    "this",
    "week",
    "recommended",
    "items",
    "based",
    "on",
    "recent",
    "views",
    "only",
    "left",
    "in",
    "stock",
];
const PRODUCTS: &[&str] = &[
    "Linen Shirt",
    "Canvas Tote",
    "Leather Boots",
    "Wool Scarf",
    "Denim Jacket",
    "Cotton Tee",
    "Rain Coat",
    "Silk Tie",
    "Running Shoes",
    "Travel Mug",
];

fn sentence(rng: &mut Rng, words: usize) -> String {
    let mut s: Vec<&str> = (0..words).map(|_| rng.pick(WORDS)).collect();
    if let Some(first) = s.first_mut() {
        *first = match *first {
            "your" => "Your",
            "our" => "Our",
            w => w,
        };
    }
    s.join(" ") + "."
}

/// An HTML email of exactly `len` bytes.
pub fn email_html(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut html = String::from(
        "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" \"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n\
<html xmlns=\"http://www.w3.org/1999/xhtml\"><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\" />\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1.0\" /><title>Your weekly picks</title></head>\n\
<body style=\"margin:0;padding:0;background-color:#f4f4f4;\">\n\
<table role=\"presentation\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"background-color:#f4f4f4;\">\n",
    );
    let footer = "<tr><td style=\"padding:24px;font-family:Arial,Helvetica,sans-serif;font-size:12px;line-height:18px;color:#888888;text-align:center;\">\
You are receiving this email because you subscribed. <a href=\"https://example.com/unsubscribe?u=0000\" style=\"color:#888888;text-decoration:underline;\">Unsubscribe</a></td></tr>\n</table>\n</body></html>\n";
    let mut block = 0u64;
    while html.len() + footer.len() < len {
        block += 1;
        let product = rng.pick(PRODUCTS);
        let price = 10 + rng.next() % 190;
        html.push_str(&format!(
            "<tr><td align=\"center\" style=\"padding:12px 24px;\">\
<table role=\"presentation\" width=\"600\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"background-color:#ffffff;border:1px solid #e0e0e0;border-radius:4px;\">\
<tr><td style=\"padding:16px 24px;font-family:Arial,Helvetica,sans-serif;font-size:18px;line-height:24px;color:#222222;font-weight:bold;\">{product}</td></tr>\
<tr><td style=\"padding:0 24px 8px 24px;font-family:Arial,Helvetica,sans-serif;font-size:14px;line-height:21px;color:#555555;\">{}</td></tr>\
<tr><td style=\"padding:0 24px 16px 24px;\"><a href=\"https://example.com/p/{block}?utm_source=newsletter&amp;utm_medium=email&amp;utm_campaign=weekly\" \
style=\"display:inline-block;padding:10px 20px;background-color:#1a73e8;color:#ffffff;font-family:Arial,Helvetica,sans-serif;font-size:14px;text-decoration:none;border-radius:4px;\">Shop now - ${price}</a></td></tr>\
</table></td></tr>\n",
            sentence(&mut rng, 12)
        ));
    }
    html.push_str(footer);
    let mut bytes = html.into_bytes();
    // Exact length: trim the last block's tail, or pad with a comment before the footer's end.
    match bytes.len().cmp(&len) {
        std::cmp::Ordering::Greater => {
            let tail = bytes.split_off(bytes.len() - footer.len());
            bytes.truncate(len.saturating_sub(tail.len()));
            bytes.extend_from_slice(&tail[..tail.len().min(len - bytes.len())]);
        }
        std::cmp::Ordering::Less => bytes.resize(len, b' '),
        std::cmp::Ordering::Equal => {}
    }
    bytes
}

/// A text message of exactly `len` bytes (the seed's is 80).
pub fn sms(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let mut text = format!("[Shop] Code {:06}: ", rng.next() % 1_000_000);
    while text.len() < len {
        text.push_str(rng.pick(WORDS));
        text.push(' ');
    }
    text.truncate(len);
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_use_the_one_size_syntax() {
        assert_eq!(PayloadKind::parse_spec("email:5M"), Ok((PayloadKind::Email, 5 << 20)));
        assert_eq!(PayloadKind::parse_spec("email:50KB"), Ok((PayloadKind::Email, 50_000)));
        assert_eq!(PayloadKind::parse_spec("sms:80"), Ok((PayloadKind::Sms, 80)));
        assert_eq!(PayloadKind::parse_spec("random:1.5MB"), Ok((PayloadKind::Random, 1_500_000)));
        assert!(PayloadKind::parse_spec("random:1.5XB").unwrap_err().contains("not a size"));
        assert!(PayloadKind::parse_spec("video:1M").unwrap_err().contains("kind"));
        assert!(PayloadKind::parse_spec("email").unwrap_err().contains("KIND:SIZE"));
    }

    #[test]
    fn payloads_have_their_length_and_are_deterministic() {
        for len in [100, 1000, 10_000, 50_000] {
            assert_eq!(email_html(len, 1).len(), len);
            assert_eq!(sms(len.min(160), 1).len(), len.min(160));
        }
        assert_eq!(email_html(50_000, 7), email_html(50_000, 7));
        assert_ne!(email_html(50_000, 7), email_html(50_000, 8));
        assert!(std::str::from_utf8(&email_html(50_000, 3)).unwrap().ends_with("</html>\n"));
    }
}
