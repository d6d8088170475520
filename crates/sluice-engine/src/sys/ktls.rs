//! Kernel TLS (kTLS): the `tls` upper-layer protocol on a connected TCP socket, the
//! `tls12_crypto_info_*` structures of `<linux/tls.h>` written out here, the `SOL_TLS` options
//! that give the kernel a direction's keys, and the control messages that carry a record's
//! content type (`TLS_GET_RECORD_TYPE` when reading an alert or a key update,
//! `TLS_SET_RECORD_TYPE` when sending one). Which keys, and when, is the callers'.

use std::io;
use std::os::fd::RawFd;

use sluice_proto::kernel_tls::{TlsCipher, TrafficKeys};

use super::{cvt, cvt_size, socket};

/// `SOL_TLS` (linux/socket.h).
const SOL_TLS: libc::c_int = 282;
/// The `SOL_TLS` option of the transmit direction's keys.
pub(crate) const TLS_TX: libc::c_int = 1;
/// The `SOL_TLS` option of the receive direction's keys.
pub(crate) const TLS_RX: libc::c_int = 2;
/// The control message naming a record's content type, sending and receiving.
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;
const TLS_1_2_VERSION: u16 = 0x0303;
const TLS_1_3_VERSION: u16 = 0x0304;
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// `struct tls_crypto_info`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CryptoInfo {
    version: u16,
    cipher_type: u16,
}

/// `struct tls12_crypto_info_aes_gcm_128` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct AesGcm128 {
    info: CryptoInfo,
    iv: [u8; 8],
    key: [u8; 16],
    salt: [u8; 4],
    rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_aes_gcm_256` (56 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct AesGcm256 {
    info: CryptoInfo,
    iv: [u8; 8],
    key: [u8; 32],
    salt: [u8; 4],
    rec_seq: [u8; 8],
}

/// `struct tls12_crypto_info_chacha20_poly1305` (56 bytes; no salt: the IV is all 12 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct Chacha20Poly1305 {
    info: CryptoInfo,
    iv: [u8; 12],
    key: [u8; 32],
    rec_seq: [u8; 8],
}

/// One of the three, as `setsockopt` takes it.
enum Crypto {
    Aes128(AesGcm128),
    Aes256(AesGcm256),
    Chacha(Chacha20Poly1305),
}

impl Crypto {
    /// The kernel's structure for `keys`; `None` when the key has the wrong length.
    fn of(keys: &TrafficKeys) -> Option<Crypto> {
        let version = if keys.tls13 { TLS_1_3_VERSION } else { TLS_1_2_VERSION };
        let rec_seq = keys.seq.to_be_bytes();
        let (salt, explicit) = keys.iv.split_at(4);
        let salt: [u8; 4] = salt.try_into().ok()?;
        let explicit: [u8; 8] = explicit.try_into().ok()?;
        Some(match keys.cipher {
            TlsCipher::Aes128Gcm => Crypto::Aes128(AesGcm128 {
                info: CryptoInfo { version, cipher_type: TLS_CIPHER_AES_GCM_128 },
                iv: explicit,
                key: keys.key.as_slice().try_into().ok()?,
                salt,
                rec_seq,
            }),
            TlsCipher::Aes256Gcm => Crypto::Aes256(AesGcm256 {
                info: CryptoInfo { version, cipher_type: TLS_CIPHER_AES_GCM_256 },
                iv: explicit,
                key: keys.key.as_slice().try_into().ok()?,
                salt,
                rec_seq,
            }),
            TlsCipher::Chacha20Poly1305 => Crypto::Chacha(Chacha20Poly1305 {
                info: CryptoInfo { version, cipher_type: TLS_CIPHER_CHACHA20_POLY1305 },
                iv: keys.iv,
                key: keys.key.as_slice().try_into().ok()?,
                rec_seq,
            }),
        })
    }

    /// The structure's address and size.
    fn raw(&self) -> (*const libc::c_void, usize) {
        match self {
            Crypto::Aes128(c) => ((c as *const AesGcm128).cast(), std::mem::size_of::<AesGcm128>()),
            Crypto::Aes256(c) => ((c as *const AesGcm256).cast(), std::mem::size_of::<AesGcm256>()),
            Crypto::Chacha(c) => {
                ((c as *const Chacha20Poly1305).cast(), std::mem::size_of::<Chacha20Poly1305>())
            }
        }
    }
}

/// Attaches the `tls` upper-layer protocol to the connected socket `fd`. Until keys are given
/// the socket still carries plain TCP.
pub(crate) fn attach_ulp(fd: RawFd) -> io::Result<()> {
    socket::set_bytes_opt(fd, libc::IPPROTO_TCP, libc::TCP_ULP, b"tls")
}

/// Gives the kernel `keys` for `direction` ([`TLS_TX`] or [`TLS_RX`]) of `fd`, which has the
/// `tls` ULP attached.
pub(crate) fn set_keys(fd: RawFd, direction: libc::c_int, keys: &TrafficKeys) -> io::Result<()> {
    let crypto = Crypto::of(keys)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "key or IV of the wrong length"))?;
    let (ptr, len) = crypto.raw();
    // SAFETY: ptr names a live repr(C) structure of len bytes, the layout linux/tls.h defines.
    cvt(unsafe { libc::setsockopt(fd, SOL_TLS, direction, ptr, len as libc::socklen_t) }).map(|_| ())
}

/// A control buffer for one record-type message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct RecordTypeControl([u8; 32]);

/// Reads one record from a kTLS socket without blocking, with its content type: how to take
/// an alert or a handshake message, which a plain read refuses with `EIO`. `(content type,
/// bytes)`; application data may come this way too (type 23).
pub(crate) fn recv_record(fd: RawFd, buf: &mut [u8]) -> io::Result<(u8, usize)> {
    let mut control = RecordTypeControl([0; 32]);
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut msg = socket::empty_msghdr();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: msg names live buffers (buf through iov, control) of the given lengths.
    let n = cvt_size(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) })?;
    // SAFETY: the kernel filled msg's control buffer; the CMSG_ macros stay inside msg_controllen.
    let content_type = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != SOL_TLS || (*cmsg).cmsg_type != TLS_GET_RECORD_TYPE {
            // No record type: a plain byte stream (the kernel tags every kTLS record).
            return Err(io::Error::new(io::ErrorKind::InvalidData, "no TLS record type"));
        }
        *libc::CMSG_DATA(cmsg)
    };
    Ok((content_type, n))
}

/// Sends `body` as one record of `content_type` (an alert, a key update) on a kTLS socket,
/// encrypted with the current transmit keys.
pub(crate) fn send_record(fd: RawFd, content_type: u8, body: &[u8]) -> io::Result<usize> {
    let mut control = RecordTypeControl([0; 32]);
    let mut iov = libc::iovec { iov_base: body.as_ptr() as *mut libc::c_void, iov_len: body.len() };
    let mut msg = socket::empty_msghdr();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size; the buffer is aligned for cmsghdr and larger than
    // CMSG_SPACE(1) (24 bytes on 64-bit Linux), so the header and its byte stay inside it.
    unsafe {
        msg.msg_controllen = libc::CMSG_SPACE(1) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = SOL_TLS;
        (*cmsg).cmsg_type = TLS_SET_RECORD_TYPE;
        (*cmsg).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(cmsg) = content_type;
    }
    // SAFETY: msg names live buffers (body is only read).
    cvt_size(unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(cipher: TlsCipher, key_len: usize) -> TrafficKeys {
        let iv = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
        TrafficKeys { tls13: true, cipher, key: vec![7; key_len], iv, seq: 0x0102 }
    }

    #[test]
    fn crypto_info_has_the_kernels_layout() {
        // The sizes the kernel checks `optlen` against (linux/tls.h:
        // TLS_CIPHER_*_{IV,KEY,SALT,REC_SEQ}_SIZE plus the 4-byte header).
        assert_eq!(std::mem::size_of::<AesGcm128>(), 40);
        assert_eq!(std::mem::size_of::<AesGcm256>(), 56);
        assert_eq!(std::mem::size_of::<Chacha20Poly1305>(), 56);
        let Some(Crypto::Aes128(c)) = Crypto::of(&keys(TlsCipher::Aes128Gcm, 16)) else { panic!() };
        assert_eq!((c.info.version, c.info.cipher_type), (0x0304, 51));
        // AES-GCM: the first 4 IV bytes are the salt, the other 8 the kernel's IV.
        assert_eq!((c.salt, c.iv), ([1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11, 12]));
        assert_eq!(c.rec_seq, [0, 0, 0, 0, 0, 0, 1, 2]);
        let Some(Crypto::Chacha(c)) = Crypto::of(&keys(TlsCipher::Chacha20Poly1305, 32)) else { panic!() };
        assert_eq!((c.info.cipher_type, c.iv[0], c.iv[11]), (54, 1, 12));
        let mut tls12 = keys(TlsCipher::Aes256Gcm, 32);
        tls12.tls13 = false;
        let Some(Crypto::Aes256(c)) = Crypto::of(&tls12) else { panic!() };
        assert_eq!((c.info.version, c.info.cipher_type), (0x0303, 52));
        assert!(Crypto::of(&keys(TlsCipher::Aes256Gcm, 16)).is_none(), "a short key is refused");
    }
}
