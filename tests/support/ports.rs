//! Loopback ports for the servers the tests start (nats-server, Prometheus,
//! the OCI registry), which take their port on the command line.
//!
//! Asking the kernel for a free port and closing it again races: the tests
//! of one binary run side by side, and two of them may be handed the same
//! port. The second server then fails to bind while the first one answers
//! in its place, until its test ends and stops it. So a port is handed out
//! at most once per test process.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// A loopback port nobody listens on right now, and that no other test of
/// this process was given.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        if given.insert(port) {
            return port;
        }
    }
}
