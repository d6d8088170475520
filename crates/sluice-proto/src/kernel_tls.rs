//! The words a session and its engine share to move a TLS connection's record layer into the
//! kernel (kTLS): the traffic keys of each direction ([`TrafficKeys`]), the request to switch
//! ([`KernelTlsKeys`]), why a switch did not happen ([`KernelTlsRefusal`]) and what a session
//! makes of a record the kernel hands up instead of decrypting into the byte stream (an alert, a
//! key update: [`RecordAction`]). Plain data only: the session (which runs the handshake) fills
//! it, the engine (which owns the socket) gives it to the kernel. Neither side's code lives here.

/// The AEAD of a TLS cipher suite, as the kernel names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsCipher {
    /// AES-128-GCM (16-byte key).
    Aes128Gcm,
    /// AES-256-GCM (32-byte key).
    Aes256Gcm,
    /// ChaCha20-Poly1305 (32-byte key).
    Chacha20Poly1305,
}

/// One direction's record protection: what the kernel needs to continue the record stream
/// exactly where user space left it.
#[derive(Clone, PartialEq, Eq)]
pub struct TrafficKeys {
    /// TLS 1.3 (else TLS 1.2).
    pub tls13: bool,
    /// The AEAD.
    pub cipher: TlsCipher,
    /// The AEAD key (16 or 32 bytes as `cipher` says).
    pub key: Vec<u8>,
    /// The 12-byte IV (for AES-GCM: 4 bytes of salt, then 8).
    pub iv: [u8; 12],
    /// The sequence number of the next record.
    pub seq: u64,
}

impl std::fmt::Debug for TrafficKeys {
    // Key material stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficKeys")
            .field("tls13", &self.tls13)
            .field("cipher", &self.cipher)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// Both directions, handed over once the handshake is over and everything before the switch
/// has been sent and read.
#[derive(Debug, Clone)]
pub struct KernelTlsKeys {
    /// Transmit (server to client).
    pub tx: TrafficKeys,
    /// Receive (client to server).
    pub rx: TrafficKeys,
}

/// Why a connection stays in user-space TLS although kernel TLS is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelTlsRefusal {
    /// Bytes beyond the handshake were already read by user space (the kernel cannot have them).
    InputPending,
    /// `setsockopt(TCP_ULP, "tls")` failed on this connection.
    Ulp,
    /// The kernel refused the keys (`TLS_TX`/`TLS_RX`) after they left rustls: the connection
    /// cannot continue and closes.
    Keys,
}

/// What a session makes of a TLS record the kernel would not put in the byte stream.
#[derive(Debug)]
pub enum RecordAction {
    /// The peer's close_notify: no more input; the connection ends once the output is sent.
    PeerClosed,
    /// A TLS 1.3 KeyUpdate: the new receive keys, and when the peer asked for it, the record
    /// to send under the old transmit keys (a handshake record body) and the new transmit keys.
    Rekey {
        /// The peer's new keys.
        rx: TrafficKeys,
        /// Our answer: a KeyUpdate body to send, then our new keys.
        answer: Option<(Vec<u8>, TrafficKeys)>,
    },
    /// Anything else (an error alert, an unexpected record): close the connection.
    Close,
}
