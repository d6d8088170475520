//! The ciphers of protected segments, over bytes in memory: `cenc` (AES-128 CTR), `cbcs`
//! (AES-128 CBC with a pattern, the IV reset for every subsample) and HLS AES-128 (CBC over the
//! whole segment with PKCS#7 padding). RustCrypto's `aes`, `ctr` and `cbc` do the block work.
//!
//! Owns the layout of each scheme over a sample: which bytes a subsample map protects, how the
//! counter or the chain runs across subsamples (ISO/IEC 23001-7 §9.3 and §9.6, RFC 8216 §5.2).
//! It does not decide the maps ([`super::subsample`]) or the IVs ([`super::boxes`]).

use aes::cipher::{BlockEncrypt, KeyInit, KeyIvInit, StreamCipher};
use aes::Aes128;

use super::subsample::Subsample;

/// AES-128 CTR with a 64-bit big-endian block counter after the 8-byte IV, as `cenc` runs it.
type Ctr = ctr::Ctr64BE<Aes128>;

/// Encrypts `sample` in place with `cenc`: the protected ranges of `map` (or the whole sample
/// when `map` is `None`) as one CTR stream from `iv` with the counter at 0.
pub fn cenc_sample(key: &[u8; 16], iv: &[u8; 8], sample: &mut [u8], map: Option<&[Subsample]>) {
    let mut counter = [0u8; 16];
    counter[..8].copy_from_slice(iv);
    let mut stream = Ctr::new(key.into(), (&counter).into());
    match map {
        None => stream.apply_keystream(sample),
        Some(map) => {
            for range in protected_ranges(map, sample.len()) {
                stream.apply_keystream(&mut sample[range]);
            }
        }
    }
}

/// Encrypts `sample` in place with `cbcs`: in each protected range of `map` (the whole sample
/// when `None`), CBC from `iv` over `crypt` blocks in every `crypt + skip` (every block when
/// both are 0); a partial last block stays clear.
pub fn cbcs_sample(
    key: &[u8; 16],
    iv: &[u8; 16],
    sample: &mut [u8],
    map: Option<&[Subsample]>,
    (crypt, skip): (u8, u8),
) {
    let aes = Aes128::new(key.into());
    let whole = 0..sample.len();
    let ranges: Vec<std::ops::Range<usize>> = match map {
        None => vec![whole],
        Some(map) => protected_ranges(map, sample.len()).collect(),
    };
    let (crypt, period) = match (crypt, skip) {
        (0, 0) => (1, 1),
        (c, s) => (usize::from(c), usize::from(c) + usize::from(s)),
    };
    for range in ranges {
        let mut chain = *iv;
        for (i, block) in sample[range].chunks_exact_mut(16).enumerate() {
            if i % period >= crypt {
                continue;
            }
            for (b, c) in block.iter_mut().zip(chain) {
                *b ^= c;
            }
            aes.encrypt_block(block.into());
            chain.copy_from_slice(block);
        }
    }
}

/// HLS `METHOD=AES-128`: `segment` encrypted whole with AES-128 CBC and PKCS#7 padding, the IV
/// being the segment's media sequence number (RFC 8216 §5.2, no `IV` attribute).
pub fn aes128_segment(key: &[u8; 16], sequence: u64, segment: &[u8]) -> Vec<u8> {
    use aes::cipher::block_padding::Pkcs7;
    use aes::cipher::BlockEncryptMut;
    let iv = u128::from(sequence).to_be_bytes();
    cbc::Encryptor::<Aes128>::new(key.into(), (&iv).into()).encrypt_padded_vec_mut::<Pkcs7>(segment)
}

/// The protected byte ranges of a sample of `len` bytes under `map`, clipped to the sample.
fn protected_ranges(map: &[Subsample], len: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut pos = 0usize;
    map.iter().filter_map(move |s| {
        let start = (pos + usize::from(s.clear)).min(len);
        let end = (start + s.protected as usize).min(len);
        pos = end;
        (end > start).then_some(start..end)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{BlockDecrypt, BlockDecryptMut};

    const KEY: [u8; 16] = *b"0123456789abcdef";

    #[test]
    fn cenc_runs_one_counter_over_the_protected_ranges_and_leaves_the_rest() {
        let clear: Vec<u8> = (0..200u8).collect();
        let map = [Subsample { clear: 10, protected: 32 }, Subsample { clear: 5, protected: 48 }];
        let mut sample = clear.clone();
        cenc_sample(&KEY, &[7; 8], &mut sample, Some(&map));
        assert_eq!(sample[..10], clear[..10]);
        assert_eq!(sample[42..47], clear[42..47]);
        assert_eq!(sample[95..], clear[95..]);
        // The same stream over the two ranges joined.
        let mut joined: Vec<u8> = clear[10..42].iter().chain(&clear[47..95]).copied().collect();
        cenc_sample(&KEY, &[7; 8], &mut joined, None);
        assert_eq!(joined[..32], sample[10..42]);
        assert_eq!(joined[32..], sample[47..95]);
    }

    #[test]
    fn cbcs_encrypts_one_block_in_ten_chained_from_the_iv_in_each_subsample() {
        let clear = vec![0x42u8; 16 * 21 + 7];
        let map = [Subsample { clear: 0, protected: 16 * 21 }, Subsample { clear: 7, protected: 0 }];
        let mut sample = clear.clone();
        let iv = [9u8; 16];
        cbcs_sample(&KEY, &iv, &mut sample, Some(&map), (1, 9));
        let aes = Aes128::new((&KEY).into());
        let mut chain = iv;
        for (i, block) in sample.chunks(16).enumerate() {
            let encrypted = matches!(i, 0 | 10 | 20);
            assert_eq!(block == &clear[i * 16..i * 16 + block.len()], !encrypted, "block {i}");
            if encrypted {
                let mut plain = [0u8; 16];
                plain.copy_from_slice(block);
                aes.decrypt_block((&mut plain).into());
                plain.iter_mut().zip(chain).for_each(|(p, c)| *p ^= c);
                assert_eq!(plain, [0x42; 16]);
                chain.copy_from_slice(block);
            }
        }
    }

    #[test]
    fn aes128_segments_decrypt_with_the_sequence_number_as_iv() {
        let segment: Vec<u8> = (0..100u8).collect();
        let out = aes128_segment(&KEY, 3, &segment);
        assert_eq!(out.len(), 112);
        let iv = 3u128.to_be_bytes();
        let plain = cbc::Decryptor::<Aes128>::new((&KEY).into(), (&iv).into())
            .decrypt_padded_vec_mut::<aes::cipher::block_padding::Pkcs7>(&out)
            .unwrap();
        assert_eq!(plain, segment);
    }
}
